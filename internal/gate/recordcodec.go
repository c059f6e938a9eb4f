package gate

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/pixie-dev/pixie/internal/helper"
	"github.com/pixie-dev/pixie/internal/store"
	"github.com/pixie-dev/pixie/runtime"
	"github.com/pixie-dev/pixie/sdk/abi"
)

// How a run record is stored (gate-run/<session>/<rev time>/<run id>).
//
// Version 1 (recordV1, the first byte) is a list of fields, each a field number (one byte)
// followed by its value: a string as its length (uvarint) and bytes, a number as a zigzag
// varint, a flag by its number alone, a word of a known set (point, action, …) as its index in
// that set's table (or 0 and the string, for a word not in it). Empty fields are not written;
// the run id and the session are not written at all (they are in the key); and the texts that
// repeat another are written once, with a flag: the original target when it is the tool's
// arguments, the final text when it is the original, the reason when it is the output's reason,
// the rule's stdout when it is the output's JSON. A decision of the block-risky-commands guest
// takes 164 bytes this way and 893 as JSON (TestRecordEncodingSize).
//
// A value that starts with '{' is a record written before version 1, as JSON: both are read
// (decodeRecord). A field number or version this code does not know is an error, never a
// silent loss: a newer server's records are not misread by an older one.
//
// The tables below are append-only: a word's index is stored, so a word is never removed or
// moved, only added at the end.

const recordV1 = 1

// Field numbers of version 1 (never reused).
const (
	fGate = 1 + iota
	fPoint
	fPreset
	fTurn
	fAgent
	fTool // flag: Tool is set (its fields follow)
	fToolName
	fToolArgs
	fToolCallID
	fMessageID
	fStartedAt // Unix nanoseconds
	fDurationMs
	fAction
	fConcludedBy
	fOutVerdict
	fOutReason
	fOutReplace
	fOutAppend
	fOutNote
	fOriginal
	fOriginalIsArgs // flag: Original is Tool.Args
	fFinal
	fFinalIsOriginal // flag: Final is Original
	fAddition
	fReason
	fReasonIsOut // flag: Reason is Output.Reason
	fSuggestion
	fNote // one per note, in order
	fStructured
	fUsageIn
	fUsageOut
	fHelperCalls // JSON
	fLogs        // JSON
	fRule        // flag: Rule is set (its fields follow)
	fRuleKind
	fRuleName
	fRuleExit
	fRuleStdout
	fRuleStdoutIsOut // flag: Rule.Stdout is Output as JSON
	fRuleDurationMs
	fModelAnswer
	fError
	fErrorDetail
	fOnError
	fCancelled
	fShowInChat
	fieldCount
)

// The known words of each set; index+1 is stored (0: the string follows).
var (
	symPoints  = []string{abi.PointUserMessage, abi.PointAgentMessage, abi.PointToolBefore, abi.PointToolAfter, abi.PointTurnEnd}
	symAgents  = []string{"root", "child"}
	symActions = []string{ActionNone, ActionReplaced, ActionAppended, ActionRejected, ActionBlocked, ActionSteered}
	symBy      = []string{ByPixie, ByHookScript, BySkippedByHook}
	symVerdict = []string{VerdictPass, VerdictStop}
	symKinds   = []string{string(runtime.KindScript), string(runtime.KindModule)}
	symOnError = []string{OnErrorContinue, OnErrorStop}
)

// fieldSyms are the word sets of the fields stored as words.
var fieldSyms = map[int][]string{fPoint: symPoints, fAgent: symAgents, fAction: symActions, fConcludedBy: symBy,
	fOutVerdict: symVerdict, fRuleKind: symKinds, fOnError: symOnError}

// Field kinds, for the decoder.
const (
	kindStr = iota
	kindInt
	kindFlag
	kindSym
)

var fieldKinds = func() [fieldCount]int {
	var k [fieldCount]int
	for _, f := range []int{fTurn, fStartedAt, fDurationMs, fUsageIn, fUsageOut, fRuleExit, fRuleDurationMs} {
		k[f] = kindInt
	}
	for _, f := range []int{fTool, fOriginalIsArgs, fFinalIsOriginal, fReasonIsOut, fStructured, fRule, fRuleStdoutIsOut, fCancelled, fShowInChat} {
		k[f] = kindFlag
	}
	for f := range fieldSyms {
		k[f] = kindSym
	}
	return k
}()

type recordEncoder struct{ b []byte }

func (e *recordEncoder) str(f int, s string) {
	if s == "" {
		return
	}
	e.b = append(e.b, byte(f))
	e.b = binary.AppendUvarint(e.b, uint64(len(s)))
	e.b = append(e.b, s...)
}

func (e *recordEncoder) num(f int, n int64) {
	if n == 0 {
		return
	}
	e.b = append(e.b, byte(f))
	e.b = binary.AppendVarint(e.b, n)
}

func (e *recordEncoder) flag(f int, on bool) {
	if on {
		e.b = append(e.b, byte(f))
	}
}

func (e *recordEncoder) sym(f int, s string) {
	if s == "" {
		return
	}
	e.b = append(e.b, byte(f))
	for i, w := range fieldSyms[f] {
		if w == s {
			e.b = binary.AppendUvarint(e.b, uint64(i+1))
			return
		}
	}
	e.b = append(e.b, 0)
	e.b = binary.AppendUvarint(e.b, uint64(len(s)))
	e.b = append(e.b, s...)
}

// encodeRecord is r in version 1 (without its id and session, which the key holds).
func encodeRecord(r *Record) ([]byte, error) {
	e := recordEncoder{b: make([]byte, 0, 256+len(r.Original)+len(r.Final))}
	e.b = append(e.b, recordV1)
	e.str(fGate, r.Gate)
	e.sym(fPoint, r.Point)
	e.str(fPreset, r.Preset)
	e.num(fTurn, int64(r.Turn))
	e.sym(fAgent, r.Agent)
	if r.Tool != nil {
		e.flag(fTool, true)
		e.str(fToolName, r.Tool.Name)
		e.str(fToolArgs, string(r.Tool.Args))
		e.str(fToolCallID, r.Tool.CallID)
	}
	e.str(fMessageID, r.MessageID)
	if !r.StartedAt.IsZero() {
		e.b = append(e.b, fStartedAt)
		e.b = binary.AppendVarint(e.b, r.StartedAt.UnixNano())
	}
	e.num(fDurationMs, r.DurationMs)
	e.sym(fAction, r.Action)
	e.sym(fConcludedBy, r.ConcludedBy)
	e.sym(fOutVerdict, r.Output.Verdict)
	e.str(fOutReason, r.Output.Reason)
	e.str(fOutReplace, r.Output.Replace)
	e.str(fOutAppend, r.Output.Append)
	e.str(fOutNote, r.Output.Note)
	switch {
	case r.Tool != nil && r.Original != "" && r.Original == string(r.Tool.Args):
		e.flag(fOriginalIsArgs, true)
	default:
		e.str(fOriginal, r.Original)
	}
	if r.Final != "" && r.Final == r.Original {
		e.flag(fFinalIsOriginal, true)
	} else {
		e.str(fFinal, r.Final)
	}
	e.str(fAddition, r.Addition)
	if r.Reason != "" && r.Reason == r.Output.Reason {
		e.flag(fReasonIsOut, true)
	} else {
		e.str(fReason, r.Reason)
	}
	e.str(fSuggestion, r.Suggestion)
	for _, n := range r.Notes {
		// An empty note is kept too: the field is written whatever its length.
		e.b = append(e.b, fNote)
		e.b = binary.AppendUvarint(e.b, uint64(len(n)))
		e.b = append(e.b, n...)
	}
	e.flag(fStructured, r.Structured)
	e.num(fUsageIn, int64(r.Usage.InputTokens))
	e.num(fUsageOut, int64(r.Usage.OutputTokens))
	if len(r.HelperCalls) > 0 {
		raw, err := json.Marshal(r.HelperCalls)
		if err != nil {
			return nil, err
		}
		e.str(fHelperCalls, string(raw))
	}
	if len(r.Logs) > 0 {
		raw, err := json.Marshal(r.Logs)
		if err != nil {
			return nil, err
		}
		e.str(fLogs, string(raw))
	}
	if r.Rule != nil {
		e.flag(fRule, true)
		e.sym(fRuleKind, string(r.Rule.Kind))
		e.str(fRuleName, r.Rule.Name)
		if r.Rule.ExitCode != 0 {
			e.b = append(e.b, fRuleExit)
			e.b = binary.AppendVarint(e.b, int64(r.Rule.ExitCode))
		}
		if r.Rule.Stdout != "" && r.Rule.Stdout == outputJSON(r.Output) {
			e.flag(fRuleStdoutIsOut, true)
		} else {
			e.str(fRuleStdout, r.Rule.Stdout)
		}
		e.num(fRuleDurationMs, r.Rule.DurationMs)
	}
	e.str(fModelAnswer, r.ModelAnswer)
	e.str(fError, r.Error)
	e.str(fErrorDetail, r.ErrorDetail)
	e.sym(fOnError, r.OnError)
	e.flag(fCancelled, r.Cancelled)
	e.flag(fShowInChat, r.ShowInChat)
	return e.b, nil
}

// outputJSON is o as encoding/json writes it (what a rule that answers exit 11 usually prints),
// byte for byte (TestOutputJSON), without reflection.
func outputJSON(o abi.GateOutput) string {
	b := make([]byte, 0, 16+len(o.Verdict)+len(o.Reason)+len(o.Replace)+len(o.Append)+len(o.Note))
	b = append(b, '{')
	for _, f := range [...]struct{ name, v string }{{`"verdict":`, o.Verdict}, {`"reason":`, o.Reason},
		{`"replace":`, o.Replace}, {`"append":`, o.Append}, {`"note":`, o.Note}} {
		if f.v == "" {
			continue
		}
		if len(b) > 1 {
			b = append(b, ',')
		}
		b = abi.AppendJSONString(append(b, f.name...), f.v)
	}
	return string(append(b, '}'))
}

var errRecordCorrupt = errors.New("corrupt run record")

// decodeRecord reads a stored record, of either encoding; key is its full store key
// (gate-run/<session>/<rev time>/<run id>), which gives a version-1 record its session and id.
func decodeRecord(key string, raw []byte) (Record, error) {
	if len(raw) > 0 && raw[0] == '{' {
		var r Record
		if err := json.Unmarshal(raw, &r); err != nil {
			return Record{}, fmt.Errorf("decode %s: %w", key, err)
		}
		normalizeRecord(&r)
		return r, nil
	}
	r, err := decodeRecordV1(raw)
	if err != nil {
		return Record{}, fmt.Errorf("decode %s: %w", key, err)
	}
	id := key[strings.LastIndexByte(key, '/')+1:]
	rest := strings.TrimPrefix(key, runsCol.Name()+"/")
	session, _, _ := strings.Cut(rest, "/")
	r.ID, r.Session = id, session
	return r, nil
}

// normalizeRecord makes the empty lists of a decoded record empty, not nil, as a record written
// by this server has them (the API shows [] either way).
func normalizeRecord(r *Record) {
	if r.Notes == nil {
		r.Notes = []string{}
	}
	if r.HelperCalls == nil {
		r.HelperCalls = []helper.Call{}
	}
}

func decodeRecordV1(raw []byte) (Record, error) {
	var r Record
	if len(raw) == 0 {
		return r, errRecordCorrupt
	}
	if raw[0] != recordV1 {
		return r, fmt.Errorf("run record encoding version %d is not known to this server", raw[0])
	}
	b := raw[1:]
	var origIsArgs, finalIsOrig, reasonIsOut, stdoutIsOut bool
	for len(b) > 0 {
		f := int(b[0])
		b = b[1:]
		if f <= 0 || f >= fieldCount {
			return r, fmt.Errorf("%w: unknown field %d", errRecordCorrupt, f)
		}
		var s string
		var n int64
		switch fieldKinds[f] {
		case kindStr:
			l, k := binary.Uvarint(b)
			if k <= 0 || uint64(len(b)-k) < l {
				return r, errRecordCorrupt
			}
			s, b = string(b[k:k+int(l)]), b[k+int(l):]
		case kindInt:
			v, k := binary.Varint(b)
			if k <= 0 {
				return r, errRecordCorrupt
			}
			n, b = v, b[k:]
		case kindSym:
			v, k := binary.Uvarint(b)
			if k <= 0 {
				return r, errRecordCorrupt
			}
			b = b[k:]
			if v == 0 {
				l, k := binary.Uvarint(b)
				if k <= 0 || uint64(len(b)-k) < l {
					return r, errRecordCorrupt
				}
				s, b = string(b[k:k+int(l)]), b[k+int(l):]
			} else {
				tab := fieldSyms[f]
				if v > uint64(len(tab)) {
					return r, fmt.Errorf("%w: unknown word %d of field %d", errRecordCorrupt, v, f)
				}
				s = tab[v-1]
			}
		}
		switch f {
		case fGate:
			r.Gate = s
		case fPoint:
			r.Point = s
		case fPreset:
			r.Preset = s
		case fTurn:
			r.Turn = int(n)
		case fAgent:
			r.Agent = s
		case fTool:
			r.Tool = &Tool{}
		case fToolName, fToolArgs, fToolCallID:
			if r.Tool == nil {
				return r, errRecordCorrupt
			}
			switch f {
			case fToolName:
				r.Tool.Name = s
			case fToolArgs:
				r.Tool.Args = json.RawMessage(s)
			default:
				r.Tool.CallID = s
			}
		case fMessageID:
			r.MessageID = s
		case fStartedAt:
			r.StartedAt = time.Unix(0, n).UTC()
		case fDurationMs:
			r.DurationMs = n
		case fAction:
			r.Action = s
		case fConcludedBy:
			r.ConcludedBy = s
		case fOutVerdict:
			r.Output.Verdict = s
		case fOutReason:
			r.Output.Reason = s
		case fOutReplace:
			r.Output.Replace = s
		case fOutAppend:
			r.Output.Append = s
		case fOutNote:
			r.Output.Note = s
		case fOriginal:
			r.Original = s
		case fOriginalIsArgs:
			origIsArgs = true
		case fFinal:
			r.Final = s
		case fFinalIsOriginal:
			finalIsOrig = true
		case fAddition:
			r.Addition = s
		case fReason:
			r.Reason = s
		case fReasonIsOut:
			reasonIsOut = true
		case fSuggestion:
			r.Suggestion = s
		case fNote:
			r.Notes = append(r.Notes, s)
		case fStructured:
			r.Structured = true
		case fUsageIn:
			r.Usage.InputTokens = int(n)
		case fUsageOut:
			r.Usage.OutputTokens = int(n)
		case fHelperCalls:
			if err := json.Unmarshal([]byte(s), &r.HelperCalls); err != nil {
				return r, fmt.Errorf("%w: helper calls: %v", errRecordCorrupt, err)
			}
		case fLogs:
			if err := json.Unmarshal([]byte(s), &r.Logs); err != nil {
				return r, fmt.Errorf("%w: logs: %v", errRecordCorrupt, err)
			}
		case fRule:
			r.Rule = &RuleRun{}
		case fRuleKind, fRuleName, fRuleExit, fRuleStdout, fRuleStdoutIsOut, fRuleDurationMs:
			if r.Rule == nil {
				return r, errRecordCorrupt
			}
			switch f {
			case fRuleKind:
				r.Rule.Kind = runtime.Kind(s)
			case fRuleName:
				r.Rule.Name = s
			case fRuleExit:
				r.Rule.ExitCode = int(n)
			case fRuleStdout:
				r.Rule.Stdout = s
			case fRuleStdoutIsOut:
				stdoutIsOut = true
			default:
				r.Rule.DurationMs = n
			}
		case fModelAnswer:
			r.ModelAnswer = s
		case fError:
			r.Error = s
		case fErrorDetail:
			r.ErrorDetail = s
		case fOnError:
			r.OnError = s
		case fCancelled:
			r.Cancelled = true
		case fShowInChat:
			r.ShowInChat = true
		}
	}
	if origIsArgs {
		if r.Tool == nil {
			return r, errRecordCorrupt
		}
		r.Original = string(r.Tool.Args)
	}
	if finalIsOrig {
		r.Final = r.Original
	}
	if reasonIsOut {
		r.Reason = r.Output.Reason
	}
	if stdoutIsOut {
		r.Rule.Stdout = outputJSON(r.Output)
	}
	normalizeRecord(&r)
	return r, nil
}

// The run id index (gate-run-id/<run id>). A run id made by this version is "run_", its start
// (Unix nanoseconds, 16 hex digits) and 8 random hex digits, so that the index is in time order
// (the retention sweep reads it oldest first) and its writes append instead of landing all over
// the key space. Its value is idxV1, the record's size (uvarint: its key and value and the
// index entry's, what records.maxBytes counts) and the session: the record's key follows from
// the session and the id. An index entry written before (a random id) is a JSON string, the
// record's key: it is read too, and the sweep handles those records apart (gate-run-old).

const idxV1 = 1

// runIndex is a decoded gate-run-id value.
type runIndex struct {
	// Key is the record's key within gate-run (session/rev time/id).
	Key string
	// Size is the bytes the record counts for (version 1 only; 0 for an older entry).
	Size int64
	// Session is the record's session (version 1 only).
	Session string
	// Legacy marks an entry written before version 1.
	Legacy bool
}

// runIDTime is the start a version-1 run id carries.
func runIDTime(id string) (time.Time, bool) {
	hex, ok := strings.CutPrefix(id, "run_")
	if !ok || len(hex) != 24 {
		return time.Time{}, false
	}
	var ns uint64
	for i := 0; i < 16; i++ {
		c := hex[i]
		var v byte
		switch {
		case c >= '0' && c <= '9':
			v = c - '0'
		case c >= 'a' && c <= 'f':
			v = c - 'a' + 10
		default:
			return time.Time{}, false
		}
		ns = ns<<4 | uint64(v)
	}
	return time.Unix(0, int64(ns)).UTC(), true
}

// recordKeyOf is the key (within gate-run) of the record of a version-1 run id in session.
func recordKeyOf(session, id string) (string, bool) {
	t, ok := runIDTime(id)
	if !ok {
		return "", false
	}
	return session + "/" + store.ReverseSortableTime(t) + "/" + id, true
}

// encodeIndex is a version-1 index value.
func encodeIndex(size int64, session string) []byte {
	b := make([]byte, 0, 4+len(session))
	b = append(b, idxV1)
	b = binary.AppendUvarint(b, uint64(size))
	return append(b, session...)
}

// decodeIndex reads a gate-run-id value of run id.
func decodeIndex(id string, raw []byte) (runIndex, error) {
	if len(raw) > 0 && raw[0] == '"' {
		var key string
		if err := json.Unmarshal(raw, &key); err != nil {
			return runIndex{}, fmt.Errorf("decode the index of %s: %w", id, err)
		}
		return runIndex{Key: key, Legacy: true}, nil
	}
	if len(raw) < 2 || raw[0] != idxV1 {
		return runIndex{}, fmt.Errorf("decode the index of %s: %w", id, errRecordCorrupt)
	}
	size, k := binary.Uvarint(raw[1:])
	if k <= 0 {
		return runIndex{}, fmt.Errorf("decode the index of %s: %w", id, errRecordCorrupt)
	}
	session := string(raw[1+k:])
	key, ok := recordKeyOf(session, id)
	if !ok || session == "" || bytes.IndexByte(raw[1+k:], '/') >= 0 {
		return runIndex{}, fmt.Errorf("decode the index of %s: %w", id, errRecordCorrupt)
	}
	return runIndex{Key: key, Size: int64(size), Session: session}, nil
}
