package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/spf13/cobra"

	"github.com/etcdbox/etcdbox/imagesig"
	"github.com/etcdbox/etcdbox/pki"
)

func init() { commands = append(commands, newSignCmd) }

// Signing key files that `etcdbox pki signing-key` writes.
const (
	signingKeyFile = "signing.key"
	signingPubFile = "signing.pub"
)

// newSignCmd is `etcdbox sign REF --key FILE`.
func newSignCmd() *cobra.Command {
	var (
		keyFile  string
		insecure bool
	)
	cmd := &cobra.Command{
		Use:   "sign REF --key FILE",
		Short: "Sign a pushed image, so that nodes that trust the key stage it",
		Long: `Sign signs the image REF (a digest, or a tag, which is resolved to its
digest and the digest signed) with the private key in FILE (PEM, PKCS#8,
unencrypted: etcdbox pki signing-key makes a pair), and pushes the
signature beside the image, in cosign's format: cosign verify --key with
the public key checks it too. Nodes whose seed lists the public key in
upgrade.trustedKeys stage only images signed by one of their keys. Signing
an image again with another key adds a signature (a key rotation).`,
		Example: `  etcdbox pki signing-key --dir pki/
  etcdbox sign registry.example.internal/etcdbox@sha256:... --key pki/signing.key`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			d, err := signImage(cmd.Context(), args[0], keyFile, insecure)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "signed %s (signature at %s)\n", d, imagesig.Tag(d))
			return nil
		},
	}
	cmd.Flags().StringVar(&keyFile, "key", "", "the private signing key (PEM)")
	cmd.Flags().BoolVar(&insecure, "insecure", false, "reach the registry over plain HTTP")
	_ = cmd.MarkFlagRequired("key")
	return cmd
}

// signImage signs ref with the key in keyFile and returns the digest it
// signed.
func signImage(ctx context.Context, ref, keyFile string, insecure bool) (name.Digest, error) {
	b, err := os.ReadFile(keyFile)
	if err != nil {
		return name.Digest{}, fmt.Errorf("--key: %w", err)
	}
	key, err := imagesig.ParsePrivateKey(b)
	if err != nil {
		return name.Digest{}, fmt.Errorf("--key %s: %w", keyFile, err)
	}
	var opts []name.Option
	if insecure {
		opts = append(opts, name.Insecure)
	}
	r, err := name.ParseReference(ref, opts...)
	if err != nil {
		return name.Digest{}, usageError{fmt.Errorf("image %s: %w", ref, err)}
	}
	d, ok := r.(name.Digest)
	if !ok {
		desc, err := remote.Head(r, remote.WithContext(ctx))
		if err != nil {
			return name.Digest{}, fmt.Errorf("resolve %s: %w", ref, err)
		}
		d = r.Context().Digest(desc.Digest.String())
	}
	if err := imagesig.Sign(ctx, d, key, remote.WithContext(ctx)); err != nil {
		return name.Digest{}, fmt.Errorf("sign %s: %w", d, err)
	}
	return d, nil
}

// newPKISigningKeyCmd is `etcdbox pki signing-key --dir DIR`.
func newPKISigningKeyCmd() *cobra.Command {
	var (
		dir   string
		force bool
	)
	cmd := &cobra.Command{
		Use:   "signing-key --dir DIR",
		Short: "Create a key pair to sign images with",
		Long: `Create an ECDSA P-256 key pair in DIR: signing.key (the private key, mode
0600; keep it off the nodes) and signing.pub (the public key: put it in
the seed's upgrade.trustedKeys). An existing key is never replaced unless
--force is given.`,
		Example: "  etcdbox pki signing-key --dir pki/",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			priv, pub, err := imagesig.GenerateKey()
			if err != nil {
				return err
			}
			keyPath, pubPath := filepath.Join(dir, signingKeyFile), filepath.Join(dir, signingPubFile)
			if _, err := os.Stat(keyPath); err == nil && !force {
				return fmt.Errorf("%s exists; --force replaces it", keyPath)
			}
			if err := os.MkdirAll(dir, 0o700); err != nil {
				return err
			}
			if err := pki.WriteFileAtomic(keyPath, priv, 0o600); err != nil {
				return err
			}
			if err := pki.WriteFileAtomic(pubPath, pub, 0o644); err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), keyPath)
			fmt.Fprintln(cmd.OutOrStdout(), pubPath)
			return nil
		},
	}
	cmd.Flags().StringVar(&dir, "dir", "", "directory to write signing.key and signing.pub to")
	cmd.Flags().BoolVar(&force, "force", false, "replace an existing signing key")
	_ = cmd.MarkFlagRequired("dir")
	return cmd
}
