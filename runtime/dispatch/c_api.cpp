// The C API: every call catches, records the message for ktune_last_error(), and returns a code.
#include <algorithm>
#include <cstring>
#include <string>

#include "ktune/ktune.h"
#include "ktune/ktune.hpp"
#include "runtime/dispatch/planner.hpp"

namespace {

thread_local std::string last_error;

template <typename F>
ktune_status guarded(F&& f) {
  try {
    f();
    last_error.clear();
    return KTUNE_OK;
  } catch (const ktune::InvalidArgument& e) {
    last_error = e.what();
    return KTUNE_ERROR_INVALID_ARGUMENT;
  } catch (const ktune::NoDevice& e) {
    last_error = e.what();
    return KTUNE_ERROR_NO_DEVICE;
  } catch (const ktune::CudaError& e) {
    last_error = e.what();
    return e.sticky() ? KTUNE_ERROR_CUDA_STICKY : KTUNE_ERROR_CUDA;
  } catch (const ktune::CompileError& e) {
    last_error = std::string(e.what()) + "\n" + e.log();
    return KTUNE_ERROR_COMPILE;
  } catch (const ktune::DatabaseError& e) {
    last_error = e.what();
    return KTUNE_ERROR_DATABASE;
  } catch (const std::exception& e) {
    last_error = e.what();
    return KTUNE_ERROR_INTERNAL;
  } catch (...) {
    last_error = "unknown error";
    return KTUNE_ERROR_INTERNAL;
  }
}

ktune::DType to_dtype(ktune_dtype t) {
  if (t != KTUNE_FP32 && t != KTUNE_FP16 && t != KTUNE_BF16)
    throw ktune::InvalidArgument("dtype " + std::to_string(static_cast<int>(t)) +
                                 " is not one of KTUNE_FP32 (0), KTUNE_FP16 (1), KTUNE_BF16 (2)");
  return static_cast<ktune::DType>(t);
}

}  // namespace

extern "C" {

const char* ktune_version(void) { return "0.1.0"; }

const char* ktune_last_error(void) { return last_error.c_str(); }

ktune_status ktune_add_rmsnorm(const void* x, const void* residual, const void* weight, void* y,
                               void* h, int64_t m, int64_t n, ktune_dtype dtype, float eps,
                               ktune_stream stream) {
  return guarded([&] {
    ktune::Runtime::global().add_rmsnorm(x, residual, weight, y, h, m, n, to_dtype(dtype), eps, stream);
  });
}

ktune_status ktune_layernorm(const void* x, const void* residual, const void* weight,
                             const void* bias, void* y, void* h, int64_t m, int64_t n,
                             ktune_dtype dtype, float eps, ktune_stream stream) {
  return guarded([&] {
    ktune::Runtime::global().layernorm(x, residual, weight, bias, y, h, m, n, to_dtype(dtype), eps,
                                       stream);
  });
}

ktune_status ktune_bias_act(const void* x, const void* bias, void* y, int64_t m, int64_t n,
                            ktune_activation act, ktune_dtype dtype, ktune_stream stream) {
  return guarded([&] {
    ktune::Runtime::global().bias_act(x, bias, y, m, n, static_cast<ktune::Activation>(act),
                                      to_dtype(dtype), stream);
  });
}

ktune_status ktune_swiglu(const void* x, void* y, int64_t m, int64_t n, ktune_dtype dtype,
                          ktune_stream stream) {
  return guarded([&] { ktune::Runtime::global().swiglu(x, y, m, n, to_dtype(dtype), stream); });
}

ktune_status ktune_softmax(const void* x, void* y, int64_t m, int64_t n, float scale,
                           ktune_dtype dtype, ktune_stream stream) {
  return guarded(
      [&] { ktune::Runtime::global().softmax(x, y, m, n, scale, to_dtype(dtype), stream); });
}

ktune_status ktune_flash_attention(const void* q, const void* k, const void* v, void* o,
                                   float* lse, int64_t b, int64_t hq, int64_t hkv, int64_t nq,
                                   int64_t nk, int64_t d, const int64_t* strides, int causal,
                                   float scale, ktune_dtype dtype, ktune_stream stream) {
  return guarded([&] {
    ktune::AttentionLayout layout;
    if (strides) {
      layout.q = {strides[0], strides[1], strides[2]};
      layout.k = {strides[3], strides[4], strides[5]};
      layout.v = {strides[6], strides[7], strides[8]};
      layout.o = {strides[9], strides[10], strides[11]};
    }
    ktune::Runtime::global().flash_attention(q, k, v, o, lse, b, hq, hkv, nq, nk, d, causal != 0,
                                             scale, to_dtype(dtype), stream,
                                             strides ? &layout : nullptr);
  });
}

ktune_status ktune_query(const char* op, const char* shape, ktune_dtype dtype, ktune_match* match,
                         char* params, size_t params_size) {
  return guarded([&] {
    if (!op || !shape) throw ktune::InvalidArgument("ktune_query: op and shape must not be null");
    ktune::MatchInfo info = ktune::Runtime::global().query(op, shape, to_dtype(dtype));
    if (match) *match = static_cast<ktune_match>(info.kind);
    if (params && params_size > 0) {
      std::size_t n = std::min(params_size - 1, info.params.size());
      std::memcpy(params, info.params.data(), n);
      params[n] = '\0';
    }
  });
}

ktune_status ktune_runtime_report(char* text, size_t size, size_t* needed) {
  return guarded([&] {
    if (text == nullptr && size > 0)
      throw ktune::InvalidArgument("ktune_runtime_report: text is null but size is " +
                                   std::to_string(size) + " (pass size 0 to ask for the length)");
    const std::string report = ktune::status_report(ktune::Runtime::global().status());
    if (needed) *needed = report.size() + 1;
    if (size == 0) return;
    std::size_t n = std::min(size - 1, report.size());
    // Cut before a UTF-8 continuation byte, so that the text stays valid UTF-8.
    if (n < report.size())
      while (n > 0 && (static_cast<unsigned char>(report[n]) & 0xc0) == 0x80) --n;
    std::memcpy(text, report.data(), n);
    text[n] = '\0';
  });
}

ktune_status ktune_reset(void) {
  return guarded([] { ktune::Runtime::global().reset(); });
}

ktune_status ktune_configure(const char* db_path, int use_shipped_databases) {
  return guarded([&] {
    ktune::RuntimeOptions o;
    if (db_path) o.db_path = db_path;
    o.use_shipped_databases = use_shipped_databases != 0;
    ktune::Runtime::global().configure(std::move(o));
  });
}

}  // extern "C"
