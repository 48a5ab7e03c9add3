// Openai-compatible streams an answer from any server speaking OpenAI's Chat
// Completions API (OpenAI, OpenRouter, Ollama, vLLM, llama.cpp's server, LM Studio...)
// through the openai plugin.
//
// It builds the plugin from ../../plugins/openai (cached after the first run), loads it
// into a host with a manifest granting the base URL's host, the model and the API key
// (as a secret the host injects into the Authorization header: the plugin never sees
// it), and streams the answer to the prompt given on the command line. The server is
// named by three environment variables, all required (the key may be empty):
//
//   - OPENAI_BASE_URL: the API's base URL, up to /v1;
//   - OPENAI_API_KEY: the API key; empty for a local server that needs none (then no
//     Authorization header is sent);
//   - OPENAI_MODEL: the model to ask.
//
// For example, with OpenAI:
//
//	OPENAI_BASE_URL=https://api.openai.com/v1 OPENAI_API_KEY=sk-... OPENAI_MODEL=gpt-4o-mini \
//		go run ./examples/openai-compatible "Why is the sky blue?"
//
// with Ollama on this machine:
//
//	OPENAI_BASE_URL=http://localhost:11434/v1 OPENAI_API_KEY= OPENAI_MODEL=llama3.2 \
//		go run ./examples/openai-compatible "Why is the sky blue?"
//
// or with OpenRouter:
//
//	OPENAI_BASE_URL=https://openrouter.ai/api/v1 OPENAI_API_KEY=sk-or-... \
//		OPENAI_MODEL=meta-llama/llama-3.1-8b-instruct go run ./examples/openai-compatible "Hi!"
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/terrarium-ai/terrarium/abi"
	"github.com/terrarium-ai/terrarium/agent"
	"github.com/terrarium-ai/terrarium/host"
	"github.com/terrarium-ai/terrarium/host/pluginbuild"
)

// usage is printed when the environment or the prompt is missing.
const usage = `usage: OPENAI_BASE_URL=<url> OPENAI_API_KEY=<key> OPENAI_MODEL=<model> openai-compatible <prompt>

  OPENAI_BASE_URL  the API's base URL, e.g. https://api.openai.com/v1 or http://localhost:11434/v1 (Ollama)
  OPENAI_API_KEY   the API key; set it empty for a local server that needs none
  OPENAI_MODEL     the model, e.g. gpt-4o-mini or llama3.2`

func main() {
	if err := run(context.Background(), os.Stdout, os.Args[1:], os.LookupEnv, pluginDir()); err != nil {
		fmt.Fprintln(os.Stderr, "openai-compatible:", err)
		os.Exit(1)
	}
}

// pluginDir is the openai plugin's source directory, next to this example's.
func pluginDir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "plugins", "openai")
}

// server is where the answer comes from, read from the environment.
type server struct {
	baseURL, key, model string
	host                string // the base URL's host and port (if it names one), granted to the plugin
}

// fromEnv reads the server's settings, saying which variables are missing.
func fromEnv(lookup func(string) (string, bool)) (*server, error) {
	var missing []string
	get := func(name string) string {
		v, ok := lookup(name)
		if !ok {
			missing = append(missing, name)
		}
		return strings.TrimSpace(v)
	}
	s := &server{baseURL: get("OPENAI_BASE_URL"), key: get("OPENAI_API_KEY"), model: get("OPENAI_MODEL")}
	if len(missing) > 0 {
		return nil, fmt.Errorf("%s not set (OPENAI_API_KEY may be set empty for a local server)\n\n%s", strings.Join(missing, ", "), usage)
	}
	if s.model == "" {
		return nil, fmt.Errorf("OPENAI_MODEL is empty\n\n%s", usage)
	}
	u, err := url.Parse(s.baseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Hostname() == "" {
		return nil, fmt.Errorf("OPENAI_BASE_URL %q is not an http or https URL\n\n%s", s.baseURL, usage)
	}
	s.host = u.Host
	return s, nil
}

// manifest grants the plugin the server's host, its config and the key.
func (s *server) manifest() host.Manifest {
	m := host.Manifest{
		HTTP:    []string{s.host},
		Config:  map[string]string{"baseURL": s.baseURL, "models": s.model, "apiKeySecret": ""},
		Timeout: host.Duration{Duration: 5 * time.Minute}, // a long answer streams for a while
	}
	if s.key != "" {
		m.Config["apiKeySecret"] = "OPENAI_API_KEY"
		m.Secrets = map[string]host.Secret{"OPENAI_API_KEY": {Value: s.key}}
	}
	return m
}

func run(ctx context.Context, w io.Writer, args []string, lookup func(string) (string, bool), plugin string) error {
	s, err := fromEnv(lookup)
	if err != nil {
		return err
	}
	prompt := strings.TrimSpace(strings.Join(args, " "))
	if prompt == "" {
		return errors.New("no prompt: give it as the arguments\n\n" + usage)
	}

	r := agent.NewRegistry()
	h, err := host.New(r, host.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	if err != nil {
		return err
	}
	defer h.Close(ctx)
	path, err := pluginbuild.Build(ctx, plugin)
	if err != nil {
		return err
	}
	if _, err := h.LoadFile(ctx, path, s.manifest()); err != nil {
		return err
	}

	var final *abi.GenerateResponse
	reasoning := false
	for v, err := range agent.GenerateStream(ctx, r, agent.WithModelName("openai/"+s.model), agent.WithPrompt(prompt)) {
		if err != nil {
			return err
		}
		if v.Done {
			final = v.Response
			break
		}
		// Reasoning, when the model shows it, goes first, in brackets.
		if t := v.Chunk.Reasoning(); t != "" {
			if !reasoning {
				fmt.Fprint(w, "[thinking: ")
				reasoning = true
			}
			fmt.Fprint(w, t)
		}
		if t := v.Chunk.Text(); t != "" {
			if reasoning {
				fmt.Fprint(w, "]\n")
				reasoning = false
			}
			fmt.Fprint(w, t)
		}
	}
	fmt.Fprintln(w)
	if final != nil {
		fmt.Fprintf(w, "(%s, finish %s", s.model, final.FinishReason)
		if u := final.Usage; u != nil && u.TotalTokens > 0 {
			fmt.Fprintf(w, ", %d tokens in, %d out", u.InputTokens, u.OutputTokens)
		}
		fmt.Fprintln(w, ")")
	}
	return nil
}
