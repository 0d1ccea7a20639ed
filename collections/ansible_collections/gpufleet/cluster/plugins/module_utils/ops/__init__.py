"""Day-two operations: drift, the drain circuit breaker, XIDs, the scheduler's daemons, cost, monitoring targets."""
