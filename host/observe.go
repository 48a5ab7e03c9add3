package host

// WithHostCallObserver has fn told of every host function a plugin calls, before the
// call is checked against the plugin's grants: the plugin's name and the function's
// ("state_get", "http_request"; ABI.md, section 3). It is how the conformance suite
// finds capabilities a plugin uses without declaring them. fn is called concurrently,
// on the plugin's call path: it must be quick.
func WithHostCallObserver(fn func(plugin, function string)) Option {
	return optionFunc(func(c *hostConfig) { c.observe = fn })
}
