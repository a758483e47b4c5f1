package devenv

import "context"

// EndOriginHolders is endOriginHolders, for the tests of package devenv_test.
func (c *Cluster) EndOriginHolders(ctx context.Context, n int) ([]int, error) {
	return c.endOriginHolders(ctx, n)
}
