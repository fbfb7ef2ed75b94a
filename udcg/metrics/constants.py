"""The metrics' choice lists and defaults that the command line's parsers read
(``udcg.flows.run_options``): plain values in a module that imports nothing, so that building a
parser (``udcg --help``) loads no numpy. The modules that use them import them from here; the
paired tests' defaults are those of ``udcg.metrics.paired_tests`` (``PairedTests``, ``CompareTests``,
``CorrelationTests``), which the options of ``compare`` and ``correlate`` read too."""

TESTS = ("permutation", "t", "wilcoxon")  # the paired tests (metrics.stats)
DEFAULT_RESAMPLES = 100_000  # random sign flips beyond EXACT_MAX_N (metrics.stats)
CORRECTIONS = ("measure", "table", "none")  # Holm's families (metrics.compare)
FORMATS = ("markdown", "csv", "json", "latex")  # a comparison's report (metrics.compare_report)
UNANNOTATED = ("error", "zero", "worst")  # a top-k document without a utility (metrics.evaluate)
CONSTANT_METRIC = ("zero", "drop")  # a metric constant over a usable question: rho 0, or left out (metrics.correlation)
GAMMA = 1.0 / 3.0  # UDCG's weight of the distracting passages (the paper's)
# UDCG_theta's hyperparameters that ``udcg fit-theta`` and ``udcg.fit_theta`` declare (``udcg.flows.theta_options``)
# and ``UDCGTheta.__init__`` takes as defaults (metrics.udcg_theta); each choice list's first word is its default.
VARIANTS = ("full", "rel-only", "binary")  # its features: u+ and u-, u+ only, 0/1 relevance instead of u+
CV_SCORES = ("spearman", "pairwise")  # the held-out score when C is chosen by cross-validation
THETA_C = 0.01  # C: SVM-rank's default
THETA_FOLDS = 5  # folds of the cross-validation that chooses C (C = 'auto')
THETA_SEED = 0  # random_state: liblinear's coordinate order

# the defaults of the paired tests (metrics.paired_tests), each a value of the lists above or a number
TEST = TESTS[0]  # the sign-flip permutation test
CORRECTION = CORRECTIONS[0]  # Holm over the run pairs of each measure
CONSTANT = CONSTANT_METRIC[0]  # rho 0
N_BOOT = 10_000  # bootstrap resamples of an interval (metrics.stats.bootstrap_ci)
LEVEL = 0.95  # an interval's coverage
ALPHA = 0.05  # the significance level after the correction
POWER = 0.8  # the power of a minimum detectable difference, and of the queries a margin needs
SEED = 0  # the seed of the bootstrap and of the random sign flips
