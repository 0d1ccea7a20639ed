"""NCCL, storage and workload acceptance: parsing the runs, judging them, the report and each node's history."""
