package mcp

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"strings"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/terrarium-ai/terrarium/abi"
	"github.com/terrarium-ai/terrarium/agent"
)

// toolResult is the MCP result of a tool's output. The output is the text content (a
// string as is, anything else as JSON) and, when it is a JSON object, the structured
// content too; a multipart response adds its parts as content blocks.
func toolResult(out any) (*mcpsdk.CallToolResult, error) {
	var parts []*abi.Part
	if mp, ok := out.(*agent.MultipartToolResponse); ok {
		out, parts = mp.Output, mp.Content
	}
	res := &mcpsdk.CallToolResult{Content: []mcpsdk.Content{}}
	if out != nil {
		b, err := json.Marshal(out)
		if err != nil {
			return nil, fmt.Errorf("encoding the output: %w", err)
		}
		text := string(b)
		if s, ok := out.(string); ok {
			text = s
		}
		res.Content = append(res.Content, &mcpsdk.TextContent{Text: text})
		if bytes.HasPrefix(b, []byte("{")) {
			res.StructuredContent = json.RawMessage(b)
		}
	}
	for _, p := range parts {
		c, err := partContent(p)
		if err != nil {
			return nil, err
		}
		res.Content = append(res.Content, c)
	}
	return res, nil
}

// partContent is the MCP content block of a part of a multipart tool response.
func partContent(p *abi.Part) (mcpsdk.Content, error) {
	switch {
	case p.Media != nil:
		if mime, data, ok := base64DataURI(p.Media.URL); ok {
			if p.Media.ContentType != "" {
				mime = p.Media.ContentType
			}
			switch {
			case strings.HasPrefix(mime, "image/"):
				return &mcpsdk.ImageContent{Data: data, MIMEType: mime}, nil
			case strings.HasPrefix(mime, "audio/"):
				return &mcpsdk.AudioContent{Data: data, MIMEType: mime}, nil
			}
			return &mcpsdk.EmbeddedResource{Resource: &mcpsdk.ResourceContents{URI: "data:" + mime, MIMEType: mime, Blob: data}}, nil
		}
		return &mcpsdk.ResourceLink{URI: p.Media.URL, Name: linkName(p.Media.URL), MIMEType: p.Media.ContentType}, nil
	case p.Resource != nil:
		return &mcpsdk.ResourceLink{URI: p.Resource.URI, Name: linkName(p.Resource.URI)}, nil
	case p.Kind == abi.PartText || p.Kind == abi.PartReasoning:
		return &mcpsdk.TextContent{Text: p.Text}, nil
	}
	b, err := json.Marshal(p)
	if err != nil {
		return nil, fmt.Errorf("encoding a %s part: %w", p.Kind, err)
	}
	return &mcpsdk.TextContent{Text: string(b)}, nil
}

// base64DataURI splits a base64 data: URI into its media type and content.
func base64DataURI(uri string) (mime string, data []byte, ok bool) {
	rest, found := strings.CutPrefix(uri, "data:")
	if !found {
		return "", nil, false
	}
	head, payload, found := strings.Cut(rest, ",")
	mime, found2 := strings.CutSuffix(head, ";base64")
	if !found || !found2 {
		return "", nil, false
	}
	data, err := base64.StdEncoding.DecodeString(payload)
	if err != nil {
		return "", nil, false
	}
	return mime, data, true
}

// linkName is the name a resource link must have: the last segment of its URI.
func linkName(uri string) string {
	if name := path.Base(uri); name != "." && name != "/" {
		return name
	}
	return uri
}

// toolOutput is the agent tool output of an MCP tool result: the structured content
// when there is some, else the text, joined; other content (images, audio, resources)
// makes it a *agent.MultipartToolResponse holding every block as a part.
func toolOutput(res *mcpsdk.CallToolResult) any {
	var texts []string
	var parts []*abi.Part
	media := false
	for _, c := range res.Content {
		switch c := c.(type) {
		case *mcpsdk.TextContent:
			texts = append(texts, c.Text)
			parts = append(parts, abi.NewTextPart(c.Text))
		case *mcpsdk.ImageContent:
			media = true
			parts = append(parts, dataPart(c.MIMEType, c.Data))
		case *mcpsdk.AudioContent:
			media = true
			parts = append(parts, dataPart(c.MIMEType, c.Data))
		case *mcpsdk.ResourceLink:
			media = true
			parts = append(parts, abi.NewResourcePart(c.URI))
		case *mcpsdk.EmbeddedResource:
			media = true
			if r := c.Resource; r != nil && r.Blob != nil {
				parts = append(parts, dataPart(r.MIMEType, r.Blob))
			} else if r != nil {
				parts = append(parts, abi.NewTextPart(r.Text))
			}
		}
	}
	var out any = strings.Join(texts, "\n")
	if res.StructuredContent != nil {
		out = res.StructuredContent
	}
	if media {
		return &agent.MultipartToolResponse{Output: out, Content: parts}
	}
	return out
}

func dataPart(mime string, data []byte) *abi.Part {
	return abi.NewMediaPart(mime, "data:"+mime+";base64,"+base64.StdEncoding.EncodeToString(data))
}

// resultError is the error of an MCP tool result with isError: the *abi.Error a
// Terrarium server put in _meta, or one made of the text content.
func resultError(res *mcpsdk.CallToolResult) error {
	if raw, ok := res.Meta[ErrorMetaKey]; ok {
		b, _ := json.Marshal(raw)
		var e abi.Error
		if json.Unmarshal(b, &e) == nil && e.Code != "" {
			return &e
		}
	}
	var texts []string
	for _, c := range res.Content {
		if t, ok := c.(*mcpsdk.TextContent); ok {
			texts = append(texts, t.Text)
		}
	}
	text := strings.TrimSpace(strings.Join(texts, "\n"))
	if text == "" {
		return errors.New("the tool failed without saying why")
	}
	return errors.New(text)
}
