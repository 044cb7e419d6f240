"""Ablations: one experiment file, one row per judge variant (Penha et al. 2025, Tables 3, 4, 8, 9).

An experiment file (TOML) names a collection, the reference labels, the runs, a base judge
configuration and a grid of variants::

    name = "metadata-fields"
    collection = "ml-100k"
    reference = "historical:rating"      # or a qrels path
    runs = "runs/ml-100k"                # for system-ranking τ (optional; a path or a list of paths)
    out = "out/ablate-fields"
    per_user = 20                        # K: judged items per user, sampled from the reference
    experiments = 3                      # N independent experiments, averaged (default 1)
    mode = "one-at-a-time"               # or "product"

    [judge]                              # the base variant (any JudgeSettings setting)
    judge = "overlap"
    fields = "title+genres"

    [grid]                               # values to try, axis by axis
    fields = ["title", "title+genres", "all"]
    profile_size = [10, 50, 100]

Every variant judges the same kind of pairs — K items per user sampled (seeded) from those the
reference judges, the alignment setting — so agreement isolates the judge. The K samples are
nested: with one seed, a user's K = 10 items are the first 10 of its K = 50 items (one seeded hash
order per user, cut at K). Item-level agreement is measured on the sampled pairs; system-ranking τ
compares the rankings under the variant's labels with the rankings under the COMPLETE reference
qrels (every label it holds, not only the sampled pairs), as the paper's Tables 4 and 9 do.

``experiments = N`` repeats the whole experiment N times, each with its own sample of judged items
and of history items (seeds derived from ``seed``, recorded in the output; experiment 1 uses
``seed`` itself, so N = 1 is the single run). Every metric is the mean over the N experiments with a
95% t-interval across them on the Fisher-z scale of its range, so it stays in it (none for N = 1).
This is not the judge's ``repeats``, which asks the same prompt R times within one experiment. Identical prompts across variants are judged once
(shared SQLite cache); ``dry_run`` counts calls and estimated tokens per variant before anything is
spent, after the checks the real run makes first (:func:`preflight`): each LLM endpoint's key, its
answer to a free probe and the model it serves. The endpoints are probed once for the whole grid.

The command's ``--per-user`` and ``--experiments`` (``per_user=``, ``experiments=`` in Python) replace the
file's keys, as the command line replaces a protocol's settings everywhere in recjudge; a protocol's
``[ablate]`` values (``--protocol penha2025``: K = 50, N = 3) fill only the keys the file leaves out.
ablation.json records where each came from (``per_user_from``: ``--per-user``, ``file``, ``protocol
NAME`` or ``default``).

The file is validated as a whole when it is loaded (:meth:`Experiment.from_dict`): unknown keys,
a value of the wrong type, an unknown judge, metadata field, prompt, split or measure, and a
variant the judge would refuse are errors naming the file and the key, before anything is read
or judged.

The package, one module per job: :mod:`.experiment` (the file's model and the options over it),
:mod:`.variants` (the variants and the job list with its seeds), :mod:`.preflight` (the free checks
before any call), :mod:`.run` (judging and scoring the grid), :mod:`.outcomes` (what a variant
measured, over N experiments) and :mod:`.tables` (the result files and the terminal table).
"""

from .experiment import RESULT_FILES, Experiment, Variant, load_experiment, variants, with_options, with_settings
from .outcomes import Estimate, ExperimentOutcome, VariantRow, across_experiments
from .preflight import endpoint_problems, preflight
from .run import check_experiment_outputs, run_experiment
from .tables import (ablation_warnings, coverage_notes, format_rows, notes, rows_frame, terminal_table, trivial_frame,
                     trivial_lines, write_results)
from .jobs import derive_seed, sampled_pairs, variant_config

__all__ = ["Estimate", "Experiment", "ExperimentOutcome", "RESULT_FILES", "Variant", "VariantRow",
           "ablation_warnings", "across_experiments", "check_experiment_outputs", "coverage_notes", "derive_seed",
           "endpoint_problems", "format_rows", "load_experiment", "notes", "preflight", "rows_frame",
           "run_experiment", "sampled_pairs", "terminal_table", "trivial_frame", "trivial_lines", "variant_config",
           "variants", "with_options", "with_settings", "write_results"]
