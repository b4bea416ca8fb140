"""`ddpctl logs`: find a job's rank logs (`files`), split and filter lines (`core`, pure), find the first failure
(`failures`, pure), follow them across requeues (`follow`, woken by `notify`), write them out (`output`) or hand
them to the Python API as an iterator (`stream`). `show` ties these together for the CLI."""
