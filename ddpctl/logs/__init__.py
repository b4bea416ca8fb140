"""`ddpctl logs`: find a job's rank logs (`files`), split and filter lines (`core`, pure), find the first failure
(`failures`, pure), follow them across requeues (`follow`, woken by `notify`), and write them out (`output`).
`show` ties these together for the CLI."""
