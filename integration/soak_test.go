package integration

import (
	"os"
	"strconv"
)

// soakScale is how many times larger than in CI the cross-engine kill
// tests' workloads run: SLUICE_SOAK_SCALE (default 1; `make soak` sets 10).
func soakScale() int {
	n, err := strconv.Atoi(os.Getenv("SLUICE_SOAK_SCALE"))
	if err != nil || n < 1 {
		return 1
	}
	return n
}
