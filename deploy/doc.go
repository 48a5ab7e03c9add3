// Package deploy turns agent files into running agents: a directory of YAML files, one
// agent each (File), becomes a Deployment, with the plugins the files name built,
// pinned and loaded with the grants the files give them, their prompts parsed, every
// model, tool and handler they name checked, and one session flow per agent in one
// registry, its snapshots in Badger unless a file says otherwise.
//
// It is what `terrarium serve` and `terrarium chat` run, and what an application
// embedding Terrarium uses to run the same files; package server only adds
// transports. Errors name the file, line and field at fault, and a deployment that
// fails to build leaves nothing loaded.
package deploy
