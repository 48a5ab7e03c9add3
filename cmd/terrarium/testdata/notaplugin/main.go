// Command notaplugin builds to a WebAssembly module that is no Terrarium plugin: it
// exports nothing of the protocol.
package main

func main() {}
