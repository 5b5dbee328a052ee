// Checks af's checkpoints (ledger-spec/04) with Go's reference signed-note package,
// golang.org/x/mod/sumdb/note, the one other transparency tools read notes with: the
// verifier key is built from the note's own origin line (the validator key), the note
// must open with it, its text must be the three checkpoint lines, and the same note with
// one changed byte of its text, or its signature, must not open.
//
// Usage: GO111MODULE=off GOPATH=/usr/share/gocode go run scripts/note-check.go NOTE...
// (Debian's golang-go and golang-golang-x-mod-dev; no network).
package main

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"os"
	"strings"

	"golang.org/x/mod/sumdb/note"
)

func check(path string) error {
	msg, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	text := string(msg)
	origin := strings.SplitN(text, "\n", 2)[0]
	keyHex := strings.TrimPrefix(origin, "af.ledger/v1/")
	if keyHex == origin || len(keyHex) != 64 {
		return fmt.Errorf("origin %q is not af.ledger/v1/<64 hex digits>", origin)
	}
	key, err := hex.DecodeString(keyHex)
	if err != nil {
		return fmt.Errorf("origin key: %v", err)
	}
	name := "af-" + keyHex[:16]
	// A verifier key as note.NewVerifier reads it: name+keyhash+base64(alg || key); Go
	// computes the key hash itself and refuses the key if ours differs.
	blob := append([]byte{1}, key...)
	id := keyID(name, blob)
	vkey := fmt.Sprintf("%s+%08x+%s", name, id, base64.StdEncoding.EncodeToString(blob))
	verifier, err := note.NewVerifier(vkey)
	if err != nil {
		return fmt.Errorf("verifier key %s: %v", vkey, err)
	}
	opened, err := note.Open(msg, note.VerifierList(verifier))
	if err != nil {
		return fmt.Errorf("note.Open: %v", err)
	}
	if len(opened.Sigs) != 1 || opened.Sigs[0].Name != name {
		return fmt.Errorf("expected one signature by %s, got %+v", name, opened.Sigs)
	}
	lines := strings.Split(strings.TrimSuffix(opened.Text, "\n"), "\n")
	if len(lines) != 3 || lines[0] != origin {
		return fmt.Errorf("signed text is not the three checkpoint lines: %q", opened.Text)
	}
	// Tampered copies must not open: a digit of the size, and a byte of the signature.
	tampered := strings.Replace(text, "\n"+lines[1]+"\n", "\n"+lines[1]+"0\n", 1)
	if _, err := note.Open([]byte(tampered), note.VerifierList(verifier)); err == nil {
		return fmt.Errorf("a note with a changed size opened")
	}
	sigAt := strings.LastIndex(text, " ") + 10
	flipped := []byte(text)
	if flipped[sigAt] == 'A' {
		flipped[sigAt] = 'B'
	} else {
		flipped[sigAt] = 'A'
	}
	if _, err := note.Open(flipped, note.VerifierList(verifier)); err == nil {
		return fmt.Errorf("a note with a changed signature opened")
	}
	// Two lines by our key name and id, one of them bad: Go refuses the note, as af does
	// (ledger-spec/04).
	doubled := string(flipped) + text[strings.LastIndex(strings.TrimSuffix(text, "\n"), "\n")+1:]
	if _, err := note.Open([]byte(doubled), note.VerifierList(verifier)); err == nil {
		return fmt.Errorf("a note with a second, bad signature by the same key opened")
	}
	fmt.Printf("ok  %s: %s size %s, signed by %s (Go's x/mod/sumdb/note)\n", path, keyHex[:16], lines[1], name)
	return nil
}

// keyID is what Go's note package derives and checks: the first 4 bytes of
// SHA-256(name || "\n" || alg || key), as ledger-spec/04 says.
func keyID(name string, blob []byte) uint32 {
	h := sha256.Sum256(append(append([]byte(name), '\n'), blob...))
	return uint32(h[0])<<24 | uint32(h[1])<<16 | uint32(h[2])<<8 | uint32(h[3])
}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: note-check NOTE...")
		os.Exit(2)
	}
	failed := false
	for _, path := range os.Args[1:] {
		if err := check(path); err != nil {
			fmt.Fprintf(os.Stderr, "FAIL %s: %v\n", path, err)
			failed = true
		}
	}
	if failed {
		os.Exit(1)
	}
}
