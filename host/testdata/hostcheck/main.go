// Command hostcheck is a test plugin: one tool per host function, each returning what
// the host answered (the payload, or the error) so the host's tests can check grants.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"runtime/debug"
	"strconv"
	"strings"

	"github.com/terrarium-ai/terrarium/abi"
	"github.com/terrarium-ai/terrarium/abi/plugin"
	"github.com/terrarium-ai/terrarium/internal/benchfixture"
	"github.com/terrarium-ai/terrarium/sdk"
)

// GC is what the gc tool returns.
type GC struct {
	Percent     int    `json:"percent"`
	MemoryLimit string `json:"memoryLimit"` // in bytes; a string, as the host decodes numbers into float64
	Env         string `json:"env"`
}

// Result is what every tool returns.
type Result struct {
	OK    any        `json:"ok,omitempty"`
	Error *abi.Error `json:"error,omitempty"`
}

func result(v any, err error) (Result, error) {
	var e *abi.Error
	if errors.As(err, &e) {
		return Result{Error: e}, nil
	}
	if err != nil {
		return Result{}, err
	}
	return Result{OK: v}, nil
}

// Empty is the input of tools that take none.
type Empty struct{}

// Text is a one-string input.
type Text struct {
	Text string `json:"text"`
}

// Any carries any JSON value.
type Any struct {
	Value any `json:"value"`
}

// Messages carries messages.
type Messages struct {
	Messages []*abi.Message `json:"messages"`
}

// Fetch is the input of the http tool.
type Fetch struct {
	URL     string            `json:"url"`
	Method  string            `json:"method,omitempty"`
	Headers map[string]string `json:"headers,omitempty"`
	Body    string            `json:"body,omitempty"`
	// Piece is the size of each read; the tool reports how many reads it took.
	Piece int `json:"piece,omitempty"`
	// Discard reads the body without keeping it: the tool reports its length only.
	Discard bool `json:"discard,omitempty"`
}

// Fetched is what the http tool saw.
type Fetched struct {
	Status  int               `json:"status"`
	Headers map[string]string `json:"headers"`
	Body    string            `json:"body"`
	Reads   int               `json:"reads"`
	Length  int               `json:"length"`
}

func main() {
	sdk.Plugin(sdk.Info{Name: "hostcheck", Version: "0.0.1", Description: "Calls each host function for the host's tests.",
		Capabilities: plugin.Capabilities{State: plugin.StateWrite, HTTP: []string{"127.0.0.1"}, Config: []string{"greeting"}, Secrets: []string{"TOKEN"}}})
	sdk.Tool("session_id", "session_id", func(ctx context.Context, _ Empty) (Result, error) { return result(sdk.SessionID()) })
	sdk.Tool("state_get", "state_get", func(ctx context.Context, _ Empty) (Result, error) { return result(sdk.State[any]()) })
	sdk.Tool("state_set", "state_set", func(ctx context.Context, in Any) (Result, error) { return result(nil, sdk.SetState(in.Value)) })
	sdk.Tool("messages_get", "messages_get", func(ctx context.Context, _ Empty) (Result, error) { return result(sdk.Messages()) })
	sdk.Tool("messages_append", "messages_append", func(ctx context.Context, in Messages) (Result, error) {
		return result(nil, sdk.AppendMessages(in.Messages...))
	})
	sdk.Tool("messages_set", "messages_set", func(ctx context.Context, in Messages) (Result, error) {
		return result(nil, sdk.SetMessages(in.Messages))
	})
	sdk.Tool("artifact_add", "artifact_add", func(ctx context.Context, in Text) (Result, error) {
		return result(nil, sdk.AddArtifact("note", []*abi.Part{abi.NewTextPart(in.Text)}, nil))
	})
	sdk.Tool("status", "stream a status", func(ctx context.Context, in Any) (Result, error) { return result(nil, sdk.Status(in.Value)) })
	sdk.Tool("config", "config_get", func(ctx context.Context, in Text) (Result, error) { return result(sdk.Config(in.Text)) })
	sdk.Tool("secret", "secret_get", func(ctx context.Context, in Text) (Result, error) { return result(sdk.Secret(in.Text)) })
	sdk.Tool("picture", "answers with content parts", func(ctx context.Context, in Text) (*sdk.MultipartOutput, error) {
		return &sdk.MultipartOutput{Output: "drawn", Content: []*abi.Part{
			abi.NewTextPart(in.Text), abi.NewMediaPart("image/png", "data:image/png;base64,iVBORw0KGgo="),
		}}, nil
	})
	sdk.Tool("log", "log", func(ctx context.Context, in Text) (Result, error) {
		sdk.Log(plugin.LogWarn, in.Text)
		return result("logged", nil)
	})
	// order is log's call with a structured input: decoded into its fields, one host
	// function (the log of its notes).
	sdk.Tool("order", "log an order's notes", func(ctx context.Context, in benchfixture.Order) (Result, error) {
		sdk.Log(plugin.LogWarn, in.Notes)
		return result(len(in.Items), nil)
	})
	// gc reports the garbage collector's settings as the guest's runtime took them from
	// its environment, and the environment variable the input names.
	sdk.Tool("gc", "the runtime's GC percent and memory limit", func(ctx context.Context, in Text) (GC, error) {
		percent := debug.SetGCPercent(100)
		debug.SetGCPercent(percent)
		return GC{Percent: percent, MemoryLimit: strconv.FormatInt(debug.SetMemoryLimit(-1), 10), Env: os.Getenv(in.Text)}, nil
	})
	// noop and raw_length are for the guest benchmarks: the least a call costs, and
	// the least a call costs that receives its input without decoding it.
	sdk.Tool("noop", "does nothing", func(ctx context.Context, _ Empty) (Empty, error) { return Empty{}, nil })
	sdk.Tool("raw_length", "the length of the raw input", func(ctx context.Context, in json.RawMessage) (int, error) { return len(in), nil })
	// echo answers with its input as it received it: what the host's tests compare the
	// input they sent with.
	sdk.Tool("echo", "the raw input back", func(ctx context.Context, in json.RawMessage) (json.RawMessage, error) { return in, nil })
	sdk.Tool("http", "http_request, http_read, http_close", func(ctx context.Context, in Fetch) (Result, error) {
		var body []byte
		if in.Body != "" {
			body = []byte(in.Body)
		}
		resp, err := sdk.HTTP(&sdk.HTTPRequest{Method: in.Method, URL: in.URL, Headers: in.Headers}, body)
		if err != nil {
			return result(nil, err)
		}
		defer resp.Body.Close()
		piece := in.Piece
		if piece <= 0 {
			piece = 32 << 10
		}
		var sb strings.Builder
		buf := make([]byte, piece)
		reads, length := 0, 0
		for {
			n, err := resp.Body.Read(buf)
			if n > 0 {
				reads++
				length += n
				if !in.Discard {
					sb.Write(buf[:n])
				}
			}
			if err == io.EOF {
				break
			}
			if err != nil {
				return result(nil, err)
			}
		}
		return result(Fetched{Status: resp.Status, Headers: resp.Header, Body: sb.String(), Reads: reads, Length: length}, nil)
	})
	sdk.Tool("http_leak", "opens responses without closing them", func(ctx context.Context, in Fetch) (Result, error) {
		for i := 0; ; i++ {
			if _, err := sdk.HTTP(&sdk.HTTPRequest{URL: in.URL}, nil); err != nil {
				return result(i, err)
			}
		}
	})
}
