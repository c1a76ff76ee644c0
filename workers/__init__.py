"""foldermind's workers: one module per worker, each a process started by the kernel."""
