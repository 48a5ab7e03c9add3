package store_test

import (
	"testing"

	"github.com/terrarium-ai/terrarium/store"
	"github.com/terrarium-ai/terrarium/store/storetest"
)

func TestMemory(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store { return store.NewMemory() })
}
