// Package tenant defines who may use a deployment, and how much: tenants (read from a
// tenants file the operator writes), their API keys, and the quotas their turns run
// under.
//
// A tenant names the agents it may use, the plugins its agents may load with the most
// each may be granted (a host.Ceiling), its own secrets (provider API keys, never
// another tenant's nor the operator's environment), and its quotas. API keys are
// random, shown once when made, and kept only as SHA-256 hashes: a key holds 128 bits of
// randomness, so a fast hash is as good as a slow one, and a stolen keys file lets no
// one in. A key belongs to one tenant and may be narrowed to some of its agents;
// revoking it takes effect at once.
//
// Package server enforces all of this for `terrarium serve`; an application embedding
// Terrarium may use Keys and Limiter in its own transport.
package tenant
