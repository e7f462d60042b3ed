"""The verdict: findings tallied, attributed, recorded and decided."""
