const char* ktune_version_string() { return "0.1.0"; }
