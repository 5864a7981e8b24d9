#include "search/gp.hpp"

#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <utility>

#include "ktune/error.hpp"

namespace ktune::gp {

namespace {

constexpr double kSqrt5 = 2.23606797749978969641;
constexpr double kPi = 3.14159265358979323846;

}  // namespace

double matern52(double r, double length_scale) {
  const double a = kSqrt5 * r / length_scale;
  return (1.0 + a + a * a / 3.0) * std::exp(-a);
}

Eigen::MatrixXd kernel_matrix(const Eigen::MatrixXd& a, const Eigen::MatrixXd& b,
                              double length_scale) {
  Eigen::MatrixXd k(a.rows(), b.rows());
  for (Eigen::Index i = 0; i < a.rows(); ++i)
    for (Eigen::Index j = 0; j < b.rows(); ++j)
      k(i, j) = matern52((a.row(i) - b.row(j)).norm(), length_scale);
  return k;
}

GaussianProcess::GaussianProcess(Eigen::MatrixXd x, Eigen::VectorXd y, Hyper hyper)
    : x_(std::move(x)), hyper_(std::move(hyper)) {
  const Eigen::Index n = x_.rows();
  if (n == 0 || y.size() != n)
    throw InvalidArgument("gaussian process: " + std::to_string(n) + " points and " +
                          std::to_string(y.size()) + " targets");
  if (hyper_.weights.size() != 0 && hyper_.weights.size() != x_.cols())
    throw InvalidArgument("gaussian process: " + std::to_string(hyper_.weights.size()) +
                          " weights for " + std::to_string(x_.cols()) + " inputs");
  if (hyper_.weights.size() != 0) x_ = x_ * hyper_.weights.asDiagonal();
  mean_ = y.mean();
  const Eigen::VectorXd r = y.array() - mean_;
  Eigen::MatrixXd c = kernel_matrix(x_, x_, hyper_.length_scale);
  c.diagonal().array() += hyper_.noise;
  // Identical encoded points with a tiny noise make c singular: add jitter until it factors.
  for (double jitter = 1e-10;; jitter *= 100.0) {
    llt_.compute(c);
    if (llt_.info() == Eigen::Success) break;
    if (jitter > 1.0) throw Error("gaussian process: the kernel matrix does not factor");
    c.diagonal().array() += jitter;
  }
  alpha_ = llt_.solve(r);
  // With c fixed, the likelihood's maximum over the signal variance is at r' c^-1 r / n; a
  // floor keeps constant targets (every point the same time) finite.
  const double dn = static_cast<double>(n);
  s2_ = std::max(r.dot(alpha_) / dn, 1e-12);
  const double log_det = 2.0 * llt_.matrixLLT().diagonal().array().log().sum();
  log_likelihood_ = -0.5 * dn * std::log(2.0 * kPi * s2_) - 0.5 * log_det - 0.5 * dn;
}

void GaussianProcess::predict(const Eigen::MatrixXd& x, Eigen::VectorXd& mean,
                              Eigen::VectorXd& variance) const {
  const Eigen::MatrixXd k =
      hyper_.weights.size() != 0
          ? kernel_matrix(x * hyper_.weights.asDiagonal(), x_, hyper_.length_scale)
          : kernel_matrix(x, x_, hyper_.length_scale);  // m x n
  mean = (k * alpha_).array() + mean_;
  const Eigen::MatrixXd v = llt_.matrixL().solve(k.transpose());      // n x m
  variance = (s2_ * (1.0 - v.colwise().squaredNorm().array())).max(0.0).matrix().transpose();
}

GaussianProcess fit(const Eigen::MatrixXd& x, const Eigen::VectorXd& y,
                    const std::vector<double>& length_scales, const std::vector<double>& noises,
                    const std::vector<double>& relevance) {
  if (length_scales.empty() || noises.empty())
    throw InvalidArgument("gaussian process: an empty hyperparameter grid");
  std::optional<GaussianProcess> best;
  for (double l : length_scales)
    for (double g : noises) {
      GaussianProcess gp(x, y, Hyper{l, g, {}});
      if (!best || gp.log_likelihood() > best->log_likelihood()) best = std::move(gp);
    }
  if (relevance.empty()) return std::move(*best);
  Hyper h = best->hyper();
  h.weights = Eigen::VectorXd::Ones(x.cols());
  for (int round = 0; round < 2; ++round)
    for (Eigen::Index j = 0; j < x.cols(); ++j) {
      const double was = h.weights(j);
      for (double f : relevance) {
        if (f == 1.0 || (was == 0.0 && f != 0.0)) continue;
        Hyper trial = h;
        trial.weights(j) = was * f;
        GaussianProcess gp(x, y, trial);
        if (gp.log_likelihood() > best->log_likelihood()) best = std::move(gp);
      }
      h = best->hyper();
      if (h.weights.size() == 0) h.weights = Eigen::VectorXd::Ones(x.cols());
    }
  return std::move(*best);
}

double expected_improvement(double mean, double sd, double best) {
  const double gain = best - mean;
  if (!(sd > 1e-12 * (1.0 + std::abs(gain)))) return std::max(gain, 0.0);
  const double z = gain / sd;
  const double cdf = 0.5 * std::erfc(-z / std::sqrt(2.0));
  const double pdf = std::exp(-0.5 * z * z) / std::sqrt(2.0 * kPi);
  return std::max(gain * cdf + sd * pdf, 0.0);
}

}  // namespace ktune::gp
