package oci_test

import (
	"context"

	"oras.land/oras-go/v2/registry/remote/auth"
)

// emptyStore is a credentials store with none.
type emptyStore struct{}

func (emptyStore) Get(context.Context, string) (auth.Credential, error) {
	return auth.EmptyCredential, nil
}
func (emptyStore) Put(context.Context, string, auth.Credential) error { return nil }
func (emptyStore) Delete(context.Context, string) error               { return nil }
