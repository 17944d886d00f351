package console

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"

	"github.com/loomgate/loom/engine"
	"github.com/loomgate/loom/store"
)

// The timeline's drawing, in SVG user units: a label column, then the
// bars' area, one row per step.
const (
	labelWidth = 260
	barsWidth  = 720
	rowHeight  = 22
	axisHeight = 24
)

// row is one step of the timeline as the response page shows it.
type row struct {
	N        int
	Kind     string
	Label    string
	Detail   string // the engine, the server, the round
	Start    time.Duration
	Duration time.Duration
	Error    string
	// The row's top (Y), and its bar's left edge, width and top, in SVG
	// units.
	X, W, Y, BarY float64
	// Items are the step's inputs and outputs (the items it wrote or
	// ran), shown behind a click.
	Items []shown
}

// shown is an item shown whole: its title and its JSON, indented.
type shown struct {
	Title string
	JSON  string
}

// tick is a mark of the time axis.
type tick struct {
	X     float64
	Label string
}

// drawing is the whole timeline of a response.
type drawing struct {
	Rows          []row
	Ticks         []tick
	Width, Height float64
	LabelWidth    float64
	Total         time.Duration
}

// draw lays out the steps of tl to scale; output are the response's
// output items, by id, for the steps' details.
func draw(tl *engine.Timeline, output map[string]json.RawMessage) drawing {
	// Room on the right for the last tick's label.
	d := drawing{Width: labelWidth + barsWidth + 36, LabelWidth: labelWidth}
	total := tl.EndUS
	for _, s := range tl.Steps {
		total = max(total, s.EndUS)
	}
	d.Total = time.Duration(total) * time.Microsecond
	scale := 0.0
	if total > 0 {
		scale = barsWidth / float64(total)
	}
	for i, s := range tl.Steps {
		r := row{N: i + 1, Kind: s.Kind, Error: s.Error,
			Start:    time.Duration(s.StartUS) * time.Microsecond,
			Duration: time.Duration(s.EndUS-s.StartUS) * time.Microsecond,
			X:        labelWidth + float64(s.StartUS)*scale,
			W:        max(float64(s.EndUS-s.StartUS)*scale, 1.5), // a step too short to see is still a mark
			Y:        axisHeight + float64(i)*rowHeight,
		}
		r.BarY = r.Y + 3
		switch s.Kind {
		case engine.StepTurn:
			r.Label = "turn " + s.Name
			r.Detail = s.Engine
			if s.InputTokens > 0 || s.OutputTokens > 0 {
				r.Detail = fmt.Sprintf("%s %d in (%s cached), %d out", s.Engine, s.InputTokens, share(s.CachedTokens, s.InputTokens), s.OutputTokens)
			}
			for _, id := range s.ItemIDs {
				r.Items = append(r.Items, item(output, id))
			}
		case engine.StepToolCall, engine.StepApproval:
			r.Label = "call " + s.Name
			if s.Kind == engine.StepApproval {
				r.Label = "approval of " + s.Name
			}
			r.Detail = s.Server
			if s.ItemID != "" {
				r.Items = append(r.Items, item(output, s.ItemID))
			}
		case engine.StepInputRound:
			r.Label = fmt.Sprintf("input round %d of %s", s.Round, s.Name)
			r.Detail = s.Server
		case engine.StepCleanup:
			r.Label = "cleanup pass"
		default:
			r.Label = s.Kind + " " + s.Name
		}
		d.Rows = append(d.Rows, r)
	}
	d.Height = axisHeight + float64(len(d.Rows))*rowHeight + 4
	for i := 0; i <= 4; i++ {
		d.Ticks = append(d.Ticks, tick{X: labelWidth + float64(i)*barsWidth/4,
			Label: formatDuration(time.Duration(float64(total)*float64(i)/4) * time.Microsecond)})
	}
	d.Ticks[0].Label = "0"
	return d
}

// item is output item id, indented, or a note that the response does not
// hold it.
func item(output map[string]json.RawMessage, id string) shown {
	raw, ok := output[id]
	if !ok {
		return shown{Title: id, JSON: "(not among the response's output items)"}
	}
	return shownItem(raw)
}

// shownItem is an item titled by its type and id.
func shownItem(raw json.RawMessage) shown {
	var h itemHead
	_ = json.Unmarshal(raw, &h)
	title := h.Type
	if h.Name != "" {
		title += " " + h.Name
	}
	if h.ID != "" {
		title += " (" + h.ID + ")"
	}
	return shown{Title: title, JSON: indent(raw)}
}

func indent(raw json.RawMessage) string {
	var b bytes.Buffer
	if json.Indent(&b, raw, "", "  ") != nil {
		return string(raw)
	}
	return b.String()
}

// outputByID indexes a response's output items by id.
func outputByID(obj object) map[string]json.RawMessage {
	m := make(map[string]json.RawMessage, len(obj.Output))
	for _, raw := range obj.Output {
		var h itemHead
		if json.Unmarshal(raw, &h) == nil && h.ID != "" {
			m[h.ID] = raw
		}
	}
	return m
}

// inputItems are a record's input items, shown.
func inputItems(rec *store.Record) []shown {
	var out []shown
	for _, it := range rec.Input {
		raw, err := json.Marshal(&it)
		if err != nil {
			continue
		}
		out = append(out, shownItem(raw))
	}
	return out
}
