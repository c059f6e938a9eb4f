package locus

import (
	"context"
	"time"

	"github.com/pixie-dev/pixie/internal/errs"
	"github.com/pixie-dev/pixie/internal/store"
)

// DeliveryView is a Delivery as executors and the settings page see it.
type DeliveryView struct {
	ID            string     `json:"id"`
	LocusID       string     `json:"locusId"`
	ChildID       string     `json:"childId"`
	MainSessionID string     `json:"mainSessionId"`
	Entry         string     `json:"entry"`
	ChatID        string     `json:"chatId"`
	ThreadID      string     `json:"threadId,omitempty"`
	ChatType      string     `json:"chatType"`
	MessageID     string     `json:"messageId"`
	SenderOpenID  string     `json:"senderOpenId"`
	Text          string     `json:"text"`
	Truncated     bool       `json:"truncated,omitempty"`
	State         string     `json:"state"`
	ToolTier      string     `json:"toolTier"`
	Executor      string     `json:"executor"`
	ReceivedAt    time.Time  `json:"receivedAt"`
	AcceptedAt    *time.Time `json:"acceptedAt,omitempty"`
	Deadline      *time.Time `json:"deadline,omitempty"`
	SettledAt     *time.Time `json:"settledAt,omitempty"`
	// ImageCount is how many images the message had.
	ImageCount int `json:"imageCount"`
	// Images are the images available to the executor (current Deliveries only).
	Images []ImageView `json:"images"`
	// ImagesUnavailable says why some or all images are missing.
	ImagesUnavailable string `json:"imagesUnavailable,omitempty"`
	Replied           bool   `json:"replied,omitempty"`
	NoReplyReason     string `json:"noReplyReason,omitempty"`
	FailReason        string `json:"failReason,omitempty"`
	// Agent is the built-in executor's agent run: its tools and tool calls with their results.
	Agent *AgentRun `json:"agent,omitempty"`
}

// ImageView is one spooled image of the current Delivery. Path is in the private spool (for an
// executor on the same machine); the image route serves the same bytes.
type ImageView struct {
	Index     int    `json:"index"`
	MediaType string `json:"mediaType"`
	Size      int64  `json:"size"`
	Path      string `json:"path"`
}

func (q *Queue) view(d Delivery, l Locus) DeliveryView {
	v := DeliveryView{
		ID: d.ID, LocusID: l.ID, ChildID: l.ChildID, MainSessionID: l.MainSessionID, Entry: l.Entry,
		ChatID: d.ChatID, ThreadID: d.ThreadID, ChatType: l.ChatType, MessageID: d.MessageID,
		SenderOpenID: d.SenderOpenID, Text: d.Text, Truncated: d.Truncated, State: d.State,
		ToolTier: l.ToolTier, Executor: l.Executor, ReceivedAt: d.ReceivedAt, AcceptedAt: d.AcceptedAt,
		Deadline: d.Deadline, SettledAt: d.SettledAt, ImageCount: len(d.Images), Images: []ImageView{},
		Replied: d.Replied, NoReplyReason: d.NoReplyReason, FailReason: d.FailReason, Agent: d.Agent,
	}
	if d.State == DeliveryCurrent && len(d.Images) > 0 {
		files, note := q.spool.Get(d.ID)
		for _, f := range files {
			v.Images = append(v.Images, ImageView{Index: f.Index, MediaType: f.MediaType, Size: f.Size, Path: f.Path})
		}
		v.ImagesUnavailable = note
	}
	return v
}

// View is d as executors see it, with its Locus.
func (q *Queue) View(ctx context.Context, d Delivery) (DeliveryView, error) {
	var l Locus
	err := q.st.View(ctx, func(tx *store.Tx) error {
		var err error
		l, err = colLocus.Get(tx, d.LocusID)
		return err
	})
	if err != nil {
		return DeliveryView{}, err
	}
	return q.view(d, l), nil
}

// Current returns the current Delivery of childID's Locus (what an external executor pulls).
// With await it waits for the Delivery's activation (working reaction, images) to finish first
// (at most two minutes): by this process, or over a shared store by the leader (it announces
// it, and records it for late askers).
func (q *Queue) Current(ctx context.Context, childID string, await bool) (DeliveryView, error) {
	var l Locus
	err := q.st.View(ctx, func(tx *store.Tx) error {
		var err error
		l, err = childLocus(tx, childID)
		return err
	})
	if err != nil {
		return DeliveryView{}, err
	}
	if l.Current == "" {
		return DeliveryView{}, errs.New(errs.NotFound, "no current delivery")
	}
	var d Delivery
	err = q.st.View(ctx, func(tx *store.Tx) error {
		var err error
		d, l, err = currentIn(tx, l.Current)
		return err
	})
	if err != nil {
		if errs.Is(err, errs.Conflict) || errs.Is(err, errs.Invalid) {
			return DeliveryView{}, errs.New(errs.NotFound, "no current delivery")
		}
		return DeliveryView{}, err
	}
	shared := q.st.Shared()
	if await && !(shared && q.readyInStore(ctx, d.ID)) {
		t := time.NewTimer(activationWait)
		defer t.Stop()
		var recheck <-chan time.Time
		if shared {
			tk := time.NewTicker(500 * time.Millisecond)
			defer tk.Stop()
			recheck = tk.C
		}
	wait:
		for {
			select {
			case <-q.readyChan(d.ID):
				break wait
			case <-recheck:
				if q.readyInStore(ctx, d.ID) {
					break wait
				}
			case <-t.C:
				break wait
			case <-ctx.Done():
				return DeliveryView{}, ctx.Err()
			}
		}
	}
	return q.view(d, l), nil
}

// activationWait bounds how long Current waits for a Delivery's activation.
const activationWait = 2 * time.Minute

// ChildExists reports whether childID serves an active Locus.
func (q *Queue) ChildExists(ctx context.Context, childID string) (bool, error) {
	var ok bool
	err := q.st.View(ctx, func(tx *store.Tx) error {
		_, err := childLocus(tx, childID)
		ok = err == nil
		return nil
	})
	return ok, err
}
