package lark

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/pixie-dev/pixie/internal/channel/lark/larkapi"
	"github.com/pixie-dev/pixie/internal/errs"
	"github.com/pixie-dev/pixie/internal/store"
)

// BindRequest binds a Lark bot. The secrets are stored in the home's credentials and never
// returned.
type BindRequest struct {
	AppID             string `json:"appId"`
	AppSecret         string `json:"appSecret"`
	VerificationToken string `json:"verificationToken"`
	// EncryptKey is optional but strongly recommended: with it, events are encrypted and signed.
	EncryptKey string `json:"encryptKey,omitempty"`
}

func checkCredential(name, v string, required bool) error {
	if v == "" {
		if required {
			return errs.New(errs.Invalid, "%s is required", name)
		}
		return nil
	}
	if len(v) > 256 {
		return errs.New(errs.Invalid, "%s is longer than 256 characters", name)
	}
	for _, r := range v {
		if r <= ' ' || r == 0x7f || r > 0x7e {
			return errs.New(errs.Invalid, "%s must be printable ASCII without spaces", name)
		}
	}
	return nil
}

// Bind verifies the credentials by fetching the bot's own open_id, then stores the secrets in
// Secrets and the open_id (the authorization key of mentions) in the store. On any failure
// nothing changes.
func (c *Channel) Bind(ctx context.Context, req BindRequest) (Status, error) {
	req.AppID = strings.TrimSpace(req.AppID)
	req.AppSecret = strings.TrimSpace(req.AppSecret)
	req.VerificationToken = strings.TrimSpace(req.VerificationToken)
	req.EncryptKey = strings.TrimSpace(req.EncryptKey)
	if err := errors.Join(
		checkCredential("appId", req.AppID, true),
		checkCredential("appSecret", req.AppSecret, true),
		checkCredential("verificationToken", req.VerificationToken, true),
		checkCredential("encryptKey", req.EncryptKey, false),
	); err != nil {
		return Status{}, errs.Wrap(errs.Invalid, err, "%s", strings.ReplaceAll(err.Error(), "\n", "; "))
	}
	a := larkapi.New(c.cfg.BaseURL, req.AppID, req.AppSecret, c.cfg.HTTPTimeout)
	openID, name, err := a.Verify(ctx, req.AppID, req.AppSecret)
	if err != nil {
		return Status{}, err
	}
	c.binder.changing.Lock()
	locked := true
	unlock := func() {
		if locked {
			locked = false
			c.binder.changing.Unlock()
		}
	}
	defer unlock()
	old := map[string]string{}
	for _, n := range []string{SecretAppID, SecretAppSecret, SecretVerificationToken, SecretEncryptKey} {
		v, ok, err := c.binder.secrets.Get(ctx, n)
		if err != nil {
			return Status{}, errs.Wrap(errs.Internal, err, "the credentials could not be read")
		}
		if ok {
			old[n] = v
		}
	}
	restore := func() {
		for _, n := range []string{SecretAppID, SecretAppSecret, SecretVerificationToken, SecretEncryptKey} {
			if v, ok := old[n]; ok {
				_ = c.binder.secrets.Set(ctx, n, v)
			} else {
				_ = c.binder.secrets.Delete(ctx, n)
			}
		}
	}
	set := func(n, v string) error {
		if v == "" {
			return c.binder.secrets.Delete(ctx, n)
		}
		return c.binder.secrets.Set(ctx, n, v)
	}
	if err := errors.Join(set(SecretAppID, req.AppID), set(SecretAppSecret, req.AppSecret),
		set(SecretVerificationToken, req.VerificationToken), set(SecretEncryptKey, req.EncryptKey)); err != nil {
		restore()
		return Status{}, errs.Wrap(errs.Internal, err, "the credentials could not be stored")
	}
	rec := bindingRecord{AppID: req.AppID, BotOpenID: openID, BotName: name, VerifiedAt: c.now()}
	if err := c.st.Update(ctx, func(tx *store.Tx) error {
		if err := c.notifyTx(tx, noteBinding); err != nil {
			return err
		}
		return colBinding.Put(tx, bindingKey, rec)
	}); err != nil {
		restore()
		return Status{}, err
	}
	c.binder.set(&liveBinding{appID: req.AppID, secret: req.AppSecret, token: req.VerificationToken, encryptKey: req.EncryptKey,
		botOpenID: openID, botName: name, verifiedAt: rec.VerifiedAt, api: a}, "")
	c.log.Info("lark: bot bound", "app_id", req.AppID, "bot_open_id", openID)
	unlock()
	c.kick()
	if c.leads() {
		c.recover(ctx)
	}
	return c.Status(ctx), nil
}

// Unbind removes the binding and its secrets. Loci and Deliveries stay; the channel is
// unavailable until a bot is bound again.
func (c *Channel) Unbind(ctx context.Context) (Status, error) {
	c.binder.changing.Lock()
	defer c.binder.changing.Unlock()
	for _, n := range []string{SecretAppID, SecretAppSecret, SecretVerificationToken, SecretEncryptKey} {
		if err := c.binder.secrets.Delete(ctx, n); err != nil {
			return Status{}, errs.Wrap(errs.Internal, err, "the credentials could not be removed")
		}
	}
	if err := c.st.Update(ctx, func(tx *store.Tx) error {
		if err := c.notifyTx(tx, noteBinding); err != nil {
			return err
		}
		return colBinding.Delete(tx, bindingKey)
	}); err != nil {
		return Status{}, err
	}
	c.binder.set(nil, "")
	c.CancelPairing()
	c.log.Info("lark: bot unbound")
	return c.Status(ctx), nil
}

// binder is the channel's live binding: the verified credentials with their SDK client, or why
// there is none. It owns its locks.
type binder struct {
	st      *store.Store
	secrets Secrets
	log     *slog.Logger
	baseURL string
	timeout time.Duration

	// changing serialises Bind, Unbind and load, so that a reload (another replica's change
	// heard) never mixes what it read with a bind in progress.
	changing sync.Mutex
	// mu guards b and problem.
	mu sync.RWMutex
	b  *liveBinding // nil while unbound or unverified
	// problem says why a stored binding could not be loaded.
	problem string
}

// liveBinding is a verified binding with its secrets and its SDK client.
type liveBinding struct {
	appID, secret, token, encryptKey string
	botOpenID, botName               string
	verifiedAt                       time.Time
	api                              *larkapi.Client
}

// live returns the live binding, or nil.
func (x *binder) live() *liveBinding {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return x.b
}

// why says why a stored binding could not be loaded ("" when none was, or it was).
func (x *binder) why() string {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return x.problem
}

// set makes b the live binding (nil: none), with the problem that stands instead.
func (x *binder) set(b *liveBinding, problem string) {
	x.mu.Lock()
	x.b, x.problem = b, problem
	x.mu.Unlock()
}

// load reads the binding's secrets and its verified bot identity.
func (x *binder) load(ctx context.Context) error {
	x.changing.Lock()
	defer x.changing.Unlock()
	var rec bindingRecord
	found := true
	err := x.st.View(ctx, func(tx *store.Tx) error {
		var err error
		rec, err = colBinding.Get(tx, bindingKey)
		if errors.Is(err, store.ErrNotFound) {
			found = false
			return nil
		}
		return err
	})
	if err != nil {
		return errs.Wrap(errs.Internal, err, "lark: read the binding")
	}
	get := func(name string) (string, error) {
		v, _, err := x.secrets.Get(ctx, name)
		return v, err
	}
	appID, err1 := get(SecretAppID)
	secret, err2 := get(SecretAppSecret)
	token, err3 := get(SecretVerificationToken)
	ekey, err4 := get(SecretEncryptKey)
	if err := errors.Join(err1, err2, err3, err4); err != nil {
		x.set(nil, "the credentials could not be read: "+describeErr(err))
		x.log.Warn("lark: credentials unreadable; the channel is unavailable", "err", err.Error())
		return nil
	}
	switch {
	case !found && appID == "":
		x.set(nil, "") // unbound (perhaps by another replica)
		return nil
	case !found:
		x.set(nil, "the binding was never verified: bind the bot again")
		return nil
	case appID == "" || secret == "" || token == "":
		x.set(nil, "the binding is incomplete (app id, app secret or verification token missing from the credentials): bind the bot again")
		return nil
	case appID != rec.AppID:
		x.set(nil, "the credentials name a different app than the verified binding: bind the bot again")
		return nil
	case !larkapi.ValidOpenID(rec.BotOpenID):
		x.set(nil, "the binding has no verified bot open_id: bind the bot again")
		return nil
	}
	x.set(&liveBinding{appID: appID, secret: secret, token: token, encryptKey: ekey,
		botOpenID: rec.BotOpenID, botName: rec.BotName, verifiedAt: rec.VerifiedAt,
		api: larkapi.New(x.baseURL, appID, secret, x.timeout)}, "")
	return nil
}
