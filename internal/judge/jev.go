package judge

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/pixie-dev/pixie/internal/clip"
	"github.com/pixie-dev/pixie/internal/errs"
	"github.com/pixie-dev/pixie/sdk/abi"
)

// jevPath is the System One endpoint under the base URL.
const jevPath = "/v1/systemone"

// maxJevResponse caps the response body read from Jev.
const maxJevResponse = 4 << 20

// jevClient is an HTTP client for TypeSafe Jev's System One API.
type jevClient struct {
	baseURL string
	model   string
	timeout time.Duration
	keys    *KeyStore
	http    *http.Client
}

func newJevClient(cfg JevConfig, keys *KeyStore) *jevClient {
	c := &jevClient{baseURL: strings.TrimRight(cfg.BaseURL, "/"), model: strings.TrimSpace(cfg.Model), timeout: cfg.Timeout, keys: keys}
	if c.baseURL == "" {
		c.baseURL = DefaultJevBaseURL
	}
	if c.model == "" {
		c.model = DefaultJevModel
	}
	if c.timeout <= 0 {
		c.timeout = DefaultJevTimeout
	}
	c.http = &http.Client{
		// Never forward the key to another host on a redirect; System One does not redirect.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	return c
}

// jevQuestion is one question on the wire: criteria is {"true","false"} for noul, an ordered
// object of option name to description for choice, and an array of levels for score.
type jevQuestion struct {
	Type         string          `json:"type"`
	Instructions string          `json:"instructions"`
	Criteria     json.RawMessage `json:"criteria,omitempty"`
}

type jevRequest struct {
	State     json.RawMessage        `json:"state"`
	Model     string                 `json:"model"`
	Questions map[string]jevQuestion `json:"questions"`
}

type jevAnswer struct {
	Type          string             `json:"type"`
	Noul          *float64           `json:"noul"`
	Choice        string             `json:"choice"`
	Score         *float64           `json:"score"`
	Probabilities map[string]float64 `json:"probabilities"`
	Confidence    *float64           `json:"confidence"`
}

type jevResponse struct {
	Model   string               `json:"model"`
	Answers map[string]jevAnswer `json:"answers"`
	Usage   struct {
		InputTokens  int `json:"input_tokens"`
		OutputTokens int `json:"output_tokens"`
	} `json:"usage"`
}

// wireRequest builds the System One request. A state that is a JSON object or array is sent as
// structured data, so questions can name its fields (`source`); anything else as a string.
func (c *jevClient) wireRequest(req abi.JudgeRequest) ([]byte, error) {
	w := jevRequest{Model: c.model, Questions: make(map[string]jevQuestion, len(req.Questions))}
	st := strings.TrimSpace(req.State)
	if (strings.HasPrefix(st, "{") || strings.HasPrefix(st, "[")) && json.Valid([]byte(st)) {
		w.State = json.RawMessage(st)
	} else {
		s, _ := json.Marshal(req.State)
		w.State = s
	}
	for id, q := range req.Questions {
		wq := jevQuestion{Type: q.Type, Instructions: q.Instructions}
		var err error
		switch q.Type {
		case abi.JudgeBool:
			if q.Criteria.True != "" || q.Criteria.False != "" {
				m := map[string]string{}
				if q.Criteria.True != "" {
					m["true"] = q.Criteria.True
				}
				if q.Criteria.False != "" {
					m["false"] = q.Criteria.False
				}
				wq.Criteria, err = json.Marshal(m)
			}
		case abi.JudgeSelect:
			var b bytes.Buffer
			b.WriteByte('{')
			for i, o := range q.Criteria.Options {
				if i > 0 {
					b.WriteByte(',')
				}
				k, _ := json.Marshal(o.Name)
				v, _ := json.Marshal(o.Description)
				b.Write(k)
				b.WriteByte(':')
				b.Write(v)
			}
			b.WriteByte('}')
			wq.Criteria = b.Bytes()
		case abi.JudgeScore:
			wq.Criteria, err = json.Marshal(q.Criteria.Levels)
		}
		if err != nil {
			return nil, err
		}
		w.Questions[id] = wq
	}
	return json.Marshal(w)
}

// judge sends req to Jev. Errors: no key → unavailable "Jev API key is not configured"; an
// HTTP error status → upstream "Jev request failed: HTTP <status>" (401: wrong key; 422:
// malformed question); timeout → timeout; a response that does not answer every question
// with valid probabilities → upstream.
func (c *jevClient) judge(ctx context.Context, req abi.JudgeRequest) (abi.JudgeResponse, error) {
	key, _, err := c.keys.Key(ctx)
	if err != nil {
		return abi.JudgeResponse{}, err
	}
	if key == "" {
		return abi.JudgeResponse{}, errs.New(errs.Unavailable, "Jev API key is not configured")
	}
	body, err := c.wireRequest(req)
	if err != nil {
		return abi.JudgeResponse{}, errs.Wrap(errs.Internal, err, "cannot encode the Jev request")
	}
	callCtx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	hreq, err := http.NewRequestWithContext(callCtx, http.MethodPost, c.baseURL+jevPath, bytes.NewReader(body))
	if err != nil {
		return abi.JudgeResponse{}, errs.Wrap(errs.Unavailable, err, "the Jev base URL %q is not usable", c.baseURL)
	}
	hreq.Header.Set("Authorization", "Bearer "+key)
	hreq.Header.Set("Content-Type", "application/json")
	hreq.Header.Set("Accept", "application/json")
	hres, err := c.http.Do(hreq)
	if err != nil {
		return abi.JudgeResponse{}, c.transportError(ctx, callCtx, key, err)
	}
	defer hres.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(hres.Body, maxJevResponse+1))
	if err != nil {
		return abi.JudgeResponse{}, c.transportError(ctx, callCtx, key, err)
	}
	if hres.StatusCode != http.StatusOK {
		return abi.JudgeResponse{}, c.statusError(hres.StatusCode, raw, key)
	}
	if len(raw) > maxJevResponse {
		return abi.JudgeResponse{}, errs.New(errs.Upstream, "Jev's response is larger than %d bytes", maxJevResponse)
	}
	var wr jevResponse
	if err := json.Unmarshal(raw, &wr); err != nil {
		return abi.JudgeResponse{}, errs.New(errs.Upstream, "Jev's response is not valid JSON")
	}
	resp := abi.JudgeResponse{
		Answers: make(map[string]abi.Answer, len(req.Questions)),
		Usage:   abi.Usage{InputTokens: wr.Usage.InputTokens, OutputTokens: wr.Usage.OutputTokens},
	}
	for _, id := range sortedIDs(req.Questions) {
		a, err := convertJevAnswer(req.Questions[id], wr.Answers[id], wr.Answers != nil && hasKey(wr.Answers, id))
		if err != nil {
			return abi.JudgeResponse{Usage: resp.Usage}, errs.New(errs.Upstream, "Jev's answer to question %q is not usable: %v", id, err)
		}
		resp.Answers[id] = a
	}
	return resp, nil
}

func hasKey(m map[string]jevAnswer, k string) bool { _, ok := m[k]; return ok }

// convertJevAnswer validates one Jev answer and turns it into an Answer with Pixie's label and
// confidence (the same definitions as the llm engine, so thresholds carry over).
func convertJevAnswer(q abi.Question, w jevAnswer, present bool) (abi.Answer, error) {
	if !present {
		return abi.Answer{}, fmt.Errorf("missing")
	}
	if w.Type != "" && w.Type != q.Type {
		return abi.Answer{}, fmt.Errorf("type %q, asked %q", w.Type, q.Type)
	}
	var weights []float64
	switch q.Type {
	case abi.JudgeBool:
		if w.Noul == nil || *w.Noul < 0 || *w.Noul > 1 || math.IsNaN(*w.Noul) {
			return abi.Answer{}, fmt.Errorf("noul is missing or outside 0..1")
		}
		weights = []float64{*w.Noul, 1 - *w.Noul}
	case abi.JudgeSelect, abi.JudgeScore:
		keys := answerKeys(q)
		index := make(map[string]int, len(keys))
		for i, k := range keys {
			index[k] = i
		}
		weights = make([]float64, len(keys))
		for k, p := range w.Probabilities {
			i, ok := index[k]
			if !ok {
				return abi.Answer{}, fmt.Errorf("probability for unknown answer %q", k)
			}
			if p < 0 || math.IsNaN(p) || math.IsInf(p, 0) {
				return abi.Answer{}, fmt.Errorf("probability of %q is negative or not finite", k)
			}
			weights[i] = p
		}
	}
	a, ok := buildAnswer(q, weights)
	if !ok {
		return abi.Answer{}, fmt.Errorf("no probabilities")
	}
	return a, nil
}

// statusError maps an HTTP error status. The body is never shown for 401 (it could quote the
// key); for other statuses a short, key-free excerpt goes into the details.
func (c *jevClient) statusError(status int, body []byte, key string) error {
	e := errs.New(errs.Upstream, "Jev request failed: HTTP %d", status)
	var hint string
	switch status {
	case http.StatusUnauthorized, http.StatusForbidden:
		hint = "the Jev API key was refused: check TYPESAFE_API_KEY"
	case http.StatusUnprocessableEntity:
		hint = "Jev refused a question as malformed"
	case http.StatusTooManyRequests:
		hint = "Jev's rate limit was reached"
	}
	details := map[string]string{}
	if hint != "" {
		details["hint"] = hint
	}
	if status != http.StatusUnauthorized && status != http.StatusForbidden {
		if d := jevErrorDetail(body); d != "" {
			details["detail"] = strings.ReplaceAll(d, key, "[redacted]")
		}
	}
	if len(details) > 0 {
		return e.WithDetails(details)
	}
	return e
}

// jevErrorDetail extracts a short message from an error body ({"detail": …} or
// {"error": {"message": …}} or {"message": …}), at most 500 bytes.
func jevErrorDetail(body []byte) string {
	var b struct {
		Detail  json.RawMessage `json:"detail"`
		Message string          `json:"message"`
		Error   json.RawMessage `json:"error"`
	}
	if json.Unmarshal(body, &b) != nil {
		return ""
	}
	var out string
	switch {
	case len(b.Detail) > 0:
		var s string
		if json.Unmarshal(b.Detail, &s) == nil {
			out = s
		} else {
			out = string(b.Detail)
		}
	case b.Message != "":
		out = b.Message
	case len(b.Error) > 0:
		var em struct {
			Message string `json:"message"`
		}
		if json.Unmarshal(b.Error, &em) == nil && em.Message != "" {
			out = em.Message
		} else {
			var s string
			if json.Unmarshal(b.Error, &s) == nil {
				out = s
			}
		}
	}
	return clip.BytesMark(out, 500, "…")
}

// transportError maps a failed round trip: the time limit (or the caller's deadline) →
// timeout; a cancelled caller → timeout "cancelled"; anything else → upstream.
func (c *jevClient) transportError(parent, callCtx context.Context, key string, err error) error {
	var ne net.Error
	msg := strings.ReplaceAll(err.Error(), key, "[redacted]")
	switch {
	case errors.Is(parent.Err(), context.Canceled):
		return errs.Wrap(errs.Timeout, context.Canceled, "Jev request cancelled")
	case errors.Is(callCtx.Err(), context.DeadlineExceeded) || errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout()):
		return errs.Wrap(errs.Timeout, context.DeadlineExceeded, "Jev request timed out (limit %s)", c.timeout)
	default:
		return errs.Wrap(errs.Upstream, errors.New(msg), "Jev request failed: %s", clip.BytesMark(msg, 300, "…"))
	}
}
