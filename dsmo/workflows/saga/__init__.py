"""The saga: compensations stacked as steps succeed, unwound in reverse, retried durably when one fails."""
