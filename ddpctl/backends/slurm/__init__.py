"""The backends that submit to Slurm: sbatch (our batch script, `sbatch.py`) and submitit (`submitit.py`),
and what they share: a job's state, cancel and preempt (`jobs.py`, `state.py`, `chain.py`), sbatch itself
(`submit.py`) and a sweep's job array (`array.py`)."""
