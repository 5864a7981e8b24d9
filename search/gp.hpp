// A small Gaussian-process regressor for the model-based strategy: Matern 5/2 kernel, constant
// mean, signal variance profiled out of the marginal likelihood, hyperparameters chosen from a
// grid, and expected improvement for minimisation.
#pragma once

#include <vector>

#include <Eigen/Dense>

namespace ktune::gp {

/// Matern 5/2 correlation at distance `r`: (1 + a + a^2 / 3) exp(-a), a = sqrt(5) r / length.
double matern52(double r, double length_scale);

/// Correlations between the rows of `a` and the rows of `b` (Euclidean distance).
Eigen::MatrixXd kernel_matrix(const Eigen::MatrixXd& a, const Eigen::MatrixXd& b,
                              double length_scale);

struct Hyper {
  double length_scale = 0.5;  // of the Matern kernel, in encoded units
  double noise = 1e-3;        // noise variance as a fraction of the signal variance
  /// Per-input weights (relevance): input j is multiplied by weights[j] before distances are
  /// taken, so 0 ignores it and 2 halves its length scale. Empty: all 1.
  Eigen::VectorXd weights;
  /// An additive share: with `groups` (sets of input indices), the correlation is (1 - additive)
  /// times the Matern of the whole distance plus `additive` times the mean over the groups of
  /// the Matern of the distance over the group's inputs. A function that is a sum of terms each
  /// of a group's inputs (an op's kernels' times) is then learnt a group at a time. 0: none.
  double additive = 0.0;
  std::vector<std::vector<Eigen::Index>> groups = {};
};

/// Correlations between the rows of `a` and the rows of `b` under `hyper`'s length scale and
/// additive share (the weights are not applied here: the GP scales its inputs by them first).
Eigen::MatrixXd correlation(const Eigen::MatrixXd& a, const Eigen::MatrixXd& b, const Hyper& hyper);

/// A GP fitted to rows of `x` with targets `y`: prior mean the mean of y, covariance
/// s2 * (K + noise * I), s2 the maximum-likelihood signal variance for these hyperparameters.
class GaussianProcess {
 public:
  /// Throws InvalidArgument when x and y disagree in size or x has no rows.
  GaussianProcess(Eigen::MatrixXd x, Eigen::VectorXd y, Hyper hyper);
  /// The same with the correlations of the rows of x with each other already computed
  /// (correlation() of x scaled by the weights, without the noise; empty: computed here):
  /// fit() shares them between noise levels.
  GaussianProcess(Eigen::MatrixXd x, Eigen::VectorXd y, Hyper hyper, Eigen::MatrixXd correlation);

  /// Log marginal likelihood of y with s2 at its maximum.
  double log_likelihood() const { return log_likelihood_; }
  double signal_variance() const { return s2_; }
  double prior_mean() const { return mean_; }
  const Hyper& hyper() const { return hyper_; }

  /// Posterior mean and variance of the noise-free function at each row of `x`.
  void predict(const Eigen::MatrixXd& x, Eigen::VectorXd& mean, Eigen::VectorXd& variance) const;
  /// The correlations of each row of `x` with the training points (m x n).
  Eigen::MatrixXd correlations(const Eigen::MatrixXd& x) const;
  /// predict() from correlations(): a caller scoring the same points under GPs that share
  /// training points (a batch chosen point by point) computes the correlations once.
  void predict_from(const Eigen::MatrixXd& k, Eigen::VectorXd& mean,
                    Eigen::VectorXd& variance) const;

 private:
  Eigen::MatrixXd x_;
  Hyper hyper_;
  double mean_ = 0.0;
  double s2_ = 1.0;
  double log_likelihood_ = 0.0;
  Eigen::LLT<Eigen::MatrixXd> llt_;  // of K + noise * I (plus jitter when needed)
  Eigen::VectorXd alpha_;            // (K + noise * I)^-1 (y - mean)
};

/// The hyperparameters of the grid (every length scale with every noise, and with `groups`
/// every additive share of `shares`) with the highest log marginal likelihood; ties to the
/// first. With `relevance`, each input's weight is then searched in turn (twice over the
/// inputs) among the multiples of its current weight in `relevance` (0 among them drops the
/// input), kept when the likelihood rises: the kernel learns which tunables matter, a
/// coordinate-wise stand-in for per-input length scales.
GaussianProcess fit(const Eigen::MatrixXd& x, const Eigen::VectorXd& y,
                    const std::vector<double>& length_scales, const std::vector<double>& noises,
                    const std::vector<double>& relevance = {},
                    const std::vector<std::vector<Eigen::Index>>& groups = {},
                    const std::vector<double>& shares = {});

/// Expected improvement below `best` of a normal prediction (mean, standard deviation):
/// E[max(best - Y, 0)]; max(best - mean, 0) when sd is 0.
double expected_improvement(double mean, double sd, double best);

}  // namespace ktune::gp
