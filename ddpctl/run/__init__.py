"""The run directory contract: what every other part writes and reads under `<run_dir>/<name>/<job id>/`.

`layout` names every path, `rundir` creates a run directory atomically, `history` is the append-only events.jsonl
(every event type, typed, and `RunHistory`, which answers every question asked of a run's past), `registry` maps
names to job ids and run dirs, `state` is the backend-neutral `JobState`, and `envvars` names the variables the
node side exports to the training side. Pure data and small file edges; no Slurm, no torch.
"""
