package main

// This plugin does not compile, on purpose: terrarium plugin build must say why.
func main() { undefinedThing() }
