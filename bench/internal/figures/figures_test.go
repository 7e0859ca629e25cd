package figures

import (
	"testing"
)

func TestRecordMergesByKey(t *testing.T) {
	dir := t.TempDir()
	t.Setenv(DirEnv, dir)
	a := Figure{Key: "roll.total", Name: "roll", Value: 70, Unit: "s"}.Ref("one plain reboot", 20)
	if a.Ratio != 3.5 {
		t.Fatalf("ratio = %v, want 3.5", a.Ratio)
	}
	if err := Record("upgrade", a, Figure{Key: "gap", Value: 1, Unit: "s"}); err != nil {
		t.Fatal(err)
	}
	a.Value = 60
	if err := Record("upgrade", a); err != nil {
		t.Fatal(err)
	}
	s, err := Read(dir, "upgrade")
	if err != nil {
		t.Fatal(err)
	}
	if s.Section != "upgrade" || len(s.Figures) != 2 || s.Figures[0].Value != 60 || s.Figures[1].Key != "gap" {
		t.Fatalf("got %+v", s)
	}
	if r := s.Ratios(); r["roll.total"] != 3.5 || r["gap"] != 0 {
		t.Fatalf("ratios %v", r)
	}
	if _, err := Read(dir, "nothing"); err == nil {
		t.Fatal("a missing section read")
	}
	if err := Record("Upgrade", a); err == nil {
		t.Fatal("a section name with upper case was taken")
	}
	if err := Record("upgrade", Figure{Key: "a b"}); err == nil {
		t.Fatal("a key with a space was taken")
	}
}

func TestRecordWithoutDirDoesNothing(t *testing.T) {
	t.Setenv(DirEnv, "")
	if err := Record("x", Figure{Key: "k"}); err != nil {
		t.Fatal(err)
	}
}
