"""The cluster side, torch-free: what runs on the nodes of a job.

`batch` answers the batch shell (record the start, fan the stop out, `decide` about requeueing), `launch` is the
one launcher per node (derives the distributed environment, picks the interface with `netif`, starts torchrun with
the argv and env from `torchrun`), and `worker` is the per-rank wrapper torchrun starts around the user's script.
"""
