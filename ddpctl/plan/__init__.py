"""From a checked spec to what gets submitted (pure): `render` the batch script from its sandboxed template,
`plan` each node's argv and env for `--dry-run`, and `doctor`'s preflight verdicts over gathered facts."""
