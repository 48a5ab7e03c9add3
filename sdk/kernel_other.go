//go:build !wasip1

package sdk

// defaultHost is the host outside a plugin: host functions fail.
func defaultHost() hostCaller { return noHost{} }
