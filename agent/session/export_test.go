package session

// WithCacheBytes sets the budgets of a snapshot store's caches, for the tests that show
// the caches change no result, only how much a save loads and encodes.
func WithCacheBytes(recent, segments int) SnapshotStoreOption {
	return snapshotStoreFunc(func(c *snapshotStoreConfig) error {
		c.recentBytes, c.segmentBytes = recent, segments
		return nil
	})
}
