package lark

import (
	"context"
	"errors"
	"strings"

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
	c.bindMu.Lock()
	locked := true
	unlock := func() {
		if locked {
			locked = false
			c.bindMu.Unlock()
		}
	}
	defer unlock()
	old := map[string]string{}
	for _, n := range []string{SecretAppID, SecretAppSecret, SecretVerificationToken, SecretEncryptKey} {
		v, ok, err := c.secrets.Get(ctx, n)
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
				_ = c.secrets.Set(ctx, n, v)
			} else {
				_ = c.secrets.Delete(ctx, n)
			}
		}
	}
	set := func(n, v string) error {
		if v == "" {
			return c.secrets.Delete(ctx, n)
		}
		return c.secrets.Set(ctx, n, v)
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
	c.mu.Lock()
	c.b = &liveBinding{appID: req.AppID, secret: req.AppSecret, token: req.VerificationToken, encryptKey: req.EncryptKey,
		botOpenID: openID, botName: name, verifiedAt: rec.VerifiedAt, api: a}
	c.bindProblem = ""
	c.mu.Unlock()
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
	c.bindMu.Lock()
	defer c.bindMu.Unlock()
	for _, n := range []string{SecretAppID, SecretAppSecret, SecretVerificationToken, SecretEncryptKey} {
		if err := c.secrets.Delete(ctx, n); err != nil {
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
	c.mu.Lock()
	c.b, c.bindProblem = nil, ""
	c.mu.Unlock()
	c.CancelPairing()
	c.log.Info("lark: bot unbound")
	return c.Status(ctx), nil
}
