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

Eigen::MatrixXd correlation(const Eigen::MatrixXd& a, const Eigen::MatrixXd& b, const Hyper& h) {
  if (!(h.additive > 0.0) || h.groups.empty()) return kernel_matrix(a, b, h.length_scale);
  // Points as contiguous columns; each pair's squared differences serve the whole distance and
  // every group's.
  const Eigen::MatrixXd at = a.transpose(), bt = b.transpose();
  const double whole = 1.0 - h.additive;
  const double share = h.additive / static_cast<double>(h.groups.size());
  Eigen::MatrixXd k(a.rows(), b.rows());
  Eigen::VectorXd sq(at.rows());
  // The training points against themselves: the upper triangle, mirrored.
  const bool self = &a == &b;
  for (Eigen::Index j = 0; j < bt.cols(); ++j)
    for (Eigen::Index i = 0; i < (self ? j + 1 : at.cols()); ++i) {
      sq = (at.col(i) - bt.col(j)).array().square().matrix();
      double sum = 0.0;
      for (const std::vector<Eigen::Index>& g : h.groups) {
        double d2 = 0.0;
        for (Eigen::Index c : g) d2 += sq(c);
        sum += matern52(std::sqrt(d2), h.length_scale);
      }
      k(i, j) = whole * matern52(std::sqrt(sq.sum()), h.length_scale) + share * sum;
      if (self) k(j, i) = k(i, j);
    }
  return k;
}

GaussianProcess::GaussianProcess(Eigen::MatrixXd x, Eigen::VectorXd y, Hyper hyper)
    : GaussianProcess(std::move(x), std::move(y), std::move(hyper), Eigen::MatrixXd()) {}

GaussianProcess::GaussianProcess(Eigen::MatrixXd x, Eigen::VectorXd y, Hyper hyper,
                                 Eigen::MatrixXd c)
    : x_(std::move(x)), hyper_(std::move(hyper)) {
  const Eigen::Index n = x_.rows();
  if (n == 0 || y.size() != n)
    throw InvalidArgument("gaussian process: " + std::to_string(n) + " points and " +
                          std::to_string(y.size()) + " targets");
  if (hyper_.weights.size() != 0 && hyper_.weights.size() != x_.cols())
    throw InvalidArgument("gaussian process: " + std::to_string(hyper_.weights.size()) +
                          " weights for " + std::to_string(x_.cols()) + " inputs");
  for (const std::vector<Eigen::Index>& g : hyper_.groups)
    for (Eigen::Index col : g)
      if (col < 0 || col >= x_.cols())
        throw InvalidArgument("gaussian process: a group names input " + std::to_string(col) +
                              " of " + std::to_string(x_.cols()));
  if (hyper_.weights.size() != 0) x_ = x_ * hyper_.weights.asDiagonal();
  mean_ = y.mean();
  const Eigen::VectorXd r = y.array() - mean_;
  if (c.size() == 0) c = correlation(x_, x_, hyper_);
  if (c.rows() != n || c.cols() != n)
    throw InvalidArgument("gaussian process: a " + std::to_string(c.rows()) + " x " +
                          std::to_string(c.cols()) + " correlation matrix for " +
                          std::to_string(n) + " points");
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

Eigen::MatrixXd GaussianProcess::correlations(const Eigen::MatrixXd& x) const {
  return hyper_.weights.size() != 0 ? correlation(x * hyper_.weights.asDiagonal(), x_, hyper_)
                                    : correlation(x, x_, hyper_);
}

void GaussianProcess::predict(const Eigen::MatrixXd& x, Eigen::VectorXd& mean,
                              Eigen::VectorXd& variance) const {
  predict_from(correlations(x), mean, variance);
}

void GaussianProcess::predict_from(const Eigen::MatrixXd& k, Eigen::VectorXd& mean,
                                   Eigen::VectorXd& variance) const {
  if (k.cols() != x_.rows())
    throw InvalidArgument("gaussian process: correlations with " + std::to_string(k.cols()) +
                          " points, not the " + std::to_string(x_.rows()) + " it was fitted to");
  mean = (k * alpha_).array() + mean_;
  const Eigen::MatrixXd v = llt_.matrixL().solve(k.transpose());      // n x m
  variance = (s2_ * (1.0 - v.colwise().squaredNorm().array())).max(0.0).matrix().transpose();
}

GaussianProcess fit(const Eigen::MatrixXd& x, const Eigen::VectorXd& y,
                    const std::vector<double>& length_scales, const std::vector<double>& noises,
                    const std::vector<double>& relevance,
                    const std::vector<std::vector<Eigen::Index>>& groups,
                    const std::vector<double>& shares) {
  if (length_scales.empty() || noises.empty())
    throw InvalidArgument("gaussian process: an empty hyperparameter grid");
  const std::vector<double> mixes =
      groups.empty() || shares.empty() ? std::vector<double>{0.0} : shares;
  const auto shape = [&](double l, double g, double a) {
    return Hyper{l, g, {}, a, a > 0.0 ? groups : std::vector<std::vector<Eigen::Index>>{}};
  };
  std::optional<GaussianProcess> best;
  // The noise only adds to the diagonal: one correlation matrix per length scale and share.
  std::vector<Eigen::MatrixXd> c(mixes.size());
  for (double l : length_scales) {
    for (std::size_t m = 0; m < mixes.size(); ++m)
      c[m] = correlation(x, x, shape(l, 0.0, mixes[m]));
    for (double g : noises)
      for (std::size_t m = 0; m < mixes.size(); ++m) {
        GaussianProcess gp(x, y, shape(l, g, mixes[m]), c[m]);
        if (!best || gp.log_likelihood() > best->log_likelihood()) best = std::move(gp);
      }
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
