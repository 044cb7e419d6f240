"""``recjudge reproduce penha2025``: every table and figure of Penha et al. 2025 from an ML-32M-ext
release folder, each cell beside the published number.

The protocol (``protocols/penha2025.toml``) gives the settings; :func:`plan_jobs` turns the chosen
targets into judge jobs (one judge configuration over a set of pairs); :func:`plan` prices them
without a call; :func:`run_reproduce` trains or reads the systems, judges through one shared cache
(a prompt two targets share is asked once; an interrupted run resumes with no repeated call),
computes the cells (:mod:`.tables`) and hands them to :mod:`recjudge.report.reproduce`.

What each target computes, as the paper defines it (section numbers are the paper's):

- table1: Judged@100 per system group (pooled / non-pooled), historical runs under the held-out
  interactions of an 80/20 split vs Cranfield runs under the human qrels (Section 4);
- figure2: the same systems ranked by nDCG@100 in both settings: Kendall's τ, its p-value and
  the rank shifts of NCEPLRec, SimpleX, DGCF and MultiVAE (Section 4); every held-out interaction
  is relevant with label 1;
- table3: agreement / tie / disagreement over pairs of one participant's items the human labels
  0 and 1-7, on the LLM's raw labels, per metadata field set, K = 50 items per participant
  (Section 5.1); figure3: the same per profile size (number of history items); figure4: the
  same over every pair of distinct human labels, by label distance;
- table4: Kendall's τ and weighted τ between the system ranking under the LLM's labels of K
  random human-judged items per participant and the ranking under the complete human qrels, on
  Compat, nDCG@100 and Bpref, K = 10/50/100/200 (Section 5.2); figure5: each system's rank under
  the LLM's labels at K = 100 vs its human rank on nDCG@100, the ranks of SimpleX, DGCF and
  NCEPLRec and the median displacement (1 for the LLM, 8 for the train-test split);
- table5: the systems' depth-100 pool judged by the LLM; Human-only, LLM fills gaps (human labels,
  calibrated LLM labels for the unjudged top-100 items: calibration from the pool items both label)
  and Full LLM (the LLM's labels of the top-100 items only); τ on Compat between the three, and
  average Judged@100 (Section 5.2);
- table8: the baseline and the defined-scale prompt, item agreement as Table 3 (Appendix B);
  table9: both prompts at K = 100, τ on Compat, nDCG@100 and Bpref (Appendix B).
- Beyond the paper: significance agreement (paired sign-flip tests, Holm) on the pool; the
  judge's popularity bias; the release's statistics against Section 3.

The package, one module per job: :mod:`.settings` (the targets and :class:`ReproduceSettings`),
:mod:`.judges` (the protocol's judge and the samples), :mod:`.jobs`, :mod:`.plan` (the price of the
jobs), :mod:`.cells`, :mod:`.run`; the cells of each table family in :mod:`.release`,
:mod:`.historical`, :mod:`.rankings`, :mod:`.agreement`, :mod:`.pool`, with :mod:`.paper` (where
the paper contradicts itself) and :mod:`.differences` (the settings that are not the paper's),
gathered by :mod:`.tables`.
"""

from .cells import CELL_COLUMNS, Cells, ReproduceResult
from .jobs import JudgeJob, plan_jobs
from .judges import base_judge, field_sets, samples, training_positives
from .plan import PlanRow, format_plan, plan
from .run import run_reproduce
from .settings import (FIELD_ROWS, JOBS_OF, K_VALUES, PROFILE_SIZES, STUDY, TABLE9_K, TARGETS, ReproduceSettings,
                       pick_measure, protocol_settings, target_measures)

__all__ = ["CELL_COLUMNS", "FIELD_ROWS", "JOBS_OF", "K_VALUES", "PROFILE_SIZES", "STUDY", "TABLE9_K", "TARGETS",
           "Cells", "JudgeJob", "PlanRow", "ReproduceResult", "ReproduceSettings", "base_judge", "field_sets",
           "format_plan", "pick_measure", "plan", "plan_jobs", "protocol_settings", "run_reproduce", "samples",
           "target_measures", "training_positives"]
