package lark

import (
	"context"
	"os"
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
}

// ImageView is one spooled image of the current Delivery. Path is in the private spool (for an
// executor on the same machine); the image route serves the same bytes.
type ImageView struct {
	Index     int    `json:"index"`
	MediaType string `json:"mediaType"`
	Size      int64  `json:"size"`
	Path      string `json:"path"`
}

func (q *queue) view(d Delivery, l Locus) DeliveryView {
	v := DeliveryView{
		ID: d.ID, LocusID: l.ID, ChildID: l.ChildID, MainSessionID: l.MainSessionID, Entry: l.Entry,
		ChatID: d.ChatID, ThreadID: d.ThreadID, ChatType: l.ChatType, MessageID: d.MessageID,
		SenderOpenID: d.SenderOpenID, Text: d.Text, Truncated: d.Truncated, State: d.State,
		ToolTier: l.ToolTier, Executor: l.Executor, ReceivedAt: d.ReceivedAt, AcceptedAt: d.AcceptedAt,
		Deadline: d.Deadline, SettledAt: d.SettledAt, ImageCount: len(d.Images), Images: []ImageView{},
		Replied: d.Replied, NoReplyReason: d.NoReplyReason, FailReason: d.FailReason,
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

func (q *queue) viewOf(ctx context.Context, d Delivery) (DeliveryView, error) {
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
// It waits for the Delivery's activation (working reaction, images) to finish first (at most
// two minutes).
func (c *Channel) Current(ctx context.Context, childID string) (DeliveryView, error) {
	var l Locus
	err := c.st.View(ctx, func(tx *store.Tx) error {
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
	err = c.st.View(ctx, func(tx *store.Tx) error {
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
	// Hand it out once its activation (working reaction, images) is done: by this process, or
	// over a shared store by the leader (it announces it, and records it for late askers).
	if c.binding() != nil && !(c.isShared() && c.readyInStore(ctx, d.ID)) {
		t := time.NewTimer(activationWait)
		defer t.Stop()
		var recheck <-chan time.Time
		if c.isShared() {
			tk := time.NewTicker(500 * time.Millisecond)
			defer tk.Stop()
			recheck = tk.C
		}
	wait:
		for {
			select {
			case <-c.q.readyChan(d.ID):
				break wait
			case <-recheck:
				if c.readyInStore(ctx, d.ID) {
					break wait
				}
			case <-t.C:
				break wait
			case <-ctx.Done():
				return DeliveryView{}, ctx.Err()
			}
		}
	}
	return c.q.view(d, l), nil
}

// activationWait bounds how long Current waits for a Delivery's activation.
const activationWait = 2 * time.Minute

// WaitCurrent is Current with a long poll: when the Locus is idle it waits up to max for a
// Delivery to become current (max zero means no waiting).
func (c *Channel) WaitCurrent(ctx context.Context, childID string, max time.Duration) (DeliveryView, error) {
	deadline := time.Now().Add(max)
	for {
		v, err := c.Current(ctx, childID)
		if err == nil || !errs.Is(err, errs.NotFound) || !time.Now().Before(deadline) {
			return v, err
		}
		if v, _ := c.q.childExists(ctx, childID); !v {
			return DeliveryView{}, err
		}
		select {
		case <-ctx.Done():
			return DeliveryView{}, errs.Wrap(errs.NotFound, ctx.Err(), "no current delivery")
		case <-c.ctx.Done():
			return DeliveryView{}, errs.New(errs.Unavailable, "the channel is shutting down")
		case <-time.After(pollInterval):
		}
	}
}

// pollInterval is how often WaitCurrent looks for a new Delivery.
const pollInterval = 200 * time.Millisecond

func (q *queue) childExists(ctx context.Context, childID string) (bool, error) {
	var ok bool
	err := q.st.View(ctx, func(tx *store.Tx) error {
		_, err := childLocus(tx, childID)
		ok = err == nil
		return nil
	})
	return ok, err
}

// Image returns the bytes and media type of image index (1-based) of the current Delivery of
// childID's Locus.
func (c *Channel) Image(ctx context.Context, childID, deliveryID string, index int) ([]byte, string, error) {
	err := c.st.View(ctx, func(tx *store.Tx) error {
		l, err := childLocus(tx, childID)
		if err != nil {
			return err
		}
		if l.Current != deliveryID {
			return errs.New(errs.NotFound, "the delivery is not current")
		}
		return nil
	})
	if err != nil {
		return nil, "", err
	}
	files, note := c.q.spool.Get(deliveryID)
	for _, f := range files {
		if f.Index == index {
			if c.q.spool.Shared() {
				data, err := c.q.spool.Body(ctx, deliveryID, index)
				if err != nil {
					return nil, "", errs.Wrap(errs.NotFound, err, "the image is no longer in the spool")
				}
				return data, f.MediaType, nil
			}
			data, err := os.ReadFile(f.Path)
			if err != nil {
				return nil, "", errs.Wrap(errs.NotFound, err, "the image is no longer in the spool")
			}
			return data, f.MediaType, nil
		}
	}
	if note != "" {
		return nil, "", errs.New(errs.NotFound, "image %d is unavailable: %s", index, note)
	}
	return nil, "", errs.New(errs.NotFound, "no image %d", index)
}
