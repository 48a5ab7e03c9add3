package provider

import (
	"context"

	"github.com/terrarium-ai/terrarium/abi"
	"github.com/terrarium-ai/terrarium/sdk"
)

// GenerateFunc serves a generate call for one of the plugin's models, with the
// plugin's settings.
type GenerateFunc func(ctx context.Context, s Settings, model string, req *abi.GenerateRequest) (*abi.GenerateResponse, error)

// Serve declares a plugin serving a remote model API: info, with the capabilities the
// settings need (Settings.Capabilities), and each model the settings name, described
// by model and served by generate. A plugin's main calls it once, with the settings
// ReadSettings returned.
func Serve(info sdk.Info, s Settings, model func(name string) *abi.ModelInfo, generate GenerateFunc) {
	info.Capabilities = s.Capabilities()
	sdk.Plugin(info)
	for _, name := range s.Models {
		sdk.Model(name, model(name), func(ctx context.Context, req *abi.GenerateRequest) (*abi.GenerateResponse, error) {
			return generate(ctx, s, name, req)
		})
	}
}
