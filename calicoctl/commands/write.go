package commands

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore"
)

// writeOp applies one verb to one resource; skipped means it was left
// alone on purpose (--skip-exists / --skip-not-exists).
type writeOp func(ctx context.Context, c datastore.Client, r v3.Resource) (skipped bool, err error)

type writeFlags struct {
	files         []string
	recursive     bool
	skipEmpty     bool
	skipExists    bool
	skipNotExists bool
}

// runWrite implements create/apply/replace/delete -f: read and validate
// every document first (nothing is written if one is invalid), then write
// them in order, carrying on past a document that fails as Calico's do, and
// report as Calico's for the verb.
func (a *app) runWrite(ctx context.Context, verb string, flags *writeFlags, op writeOp) error {
	if ctx == nil {
		ctx = context.Background()
	}
	ins, err := a.readInputs(flags.files, inputOptions{validate: verb != "delete", recursive: flags.recursive, skipEmpty: flags.skipEmpty})
	if err != nil {
		return err
	}
	if len(ins) == 0 {
		fmt.Fprintln(a.stdout, "No resources specified")
		return nil
	}
	if verb != "delete" {
		if err := a.checkInputsUnsupported(ins); err != nil {
			return err
		}
	}
	if verb == "create" {
		// New pools overlapping each other: the datastore would take the
		// first and refuse the second; refuse the lot before writing.
		if err := inputPoolOverlaps(ins); err != nil {
			return err
		}
	}
	c, err := a.client()
	if err != nil {
		return err
	}
	defer c.Close()
	res := writeResults{total: len(ins), kind: singleKind(ins)}
	for _, in := range ins {
		// Skipped resources (--skip-exists, --skip-not-exists) count as
		// handled, as Calico counts them.
		if _, err := op(ctx, c, in.r); err != nil {
			res.errs = append(res.errs, withPlace(in.where(), a.friendly(err)))
			continue
		}
		res.handled++
	}
	return a.report(verb, res)
}

// checkInputsUnsupported warns about every input's values Tabby does
// not honour and refuses the lot, before anything is written, if one is a
// security setting (see checkUnsupported).
func (a *app) checkInputsUnsupported(ins []inputResource) error {
	var errs []string
	for _, in := range ins {
		if err := a.checkUnsupported(in.r, nil); err != nil {
			errs = append(errs, err.Error()) // names the resource
		}
	}
	if len(errs) > 0 {
		return errors.New(strings.Join(errs, "\n"))
	}
	return nil
}

// writeResults is what a multi-document write did.
type writeResults struct {
	total   int     // documents (or names) given
	handled int     // written, or skipped on purpose
	errs    []error // one per document that failed, in order
	kind    string  // the one kind of every document; "" when mixed
}

// pastTense of the writing verbs, for Calico's messages.
var pastTense = map[string]string{"create": "created", "apply": "applied", "replace": "replaced", "delete": "deleted"}

// report prints and returns the outcome as Calico's calicoctl does: every
// failure is reported and any makes the command fail. delete says how
// many it deleted, then one "Failed to delete ..." line per failure;
// create and apply say "failed to <verb> ..." when nothing was written,
// else "Partial success: ..." (printed, with Calico's arithmetic, only
// when the successes outnumber the failures) and "hit error: [...]".
// replace reports as they do (Calico's replace counts a failed document as
// replaced and names only the last error).
func (a *app) report(verb string, r writeResults) error {
	past := pastTense[verb]
	if verb == "delete" {
		if r.handled > 0 {
			fmt.Fprintln(a.stdout, successMessage(past, r.handled, r.kind))
		}
		if len(r.errs) == 0 {
			return nil
		}
		// One line each, every one ending in a newline as Calico's (so
		// the error, printed with one more, ends in an empty line).
		var b strings.Builder
		for _, err := range r.errs {
			fmt.Fprintf(&b, "Failed to delete %sresource: %v\n", kindWord(r.kind), err)
		}
		return errors.New(b.String())
	}
	switch {
	case len(r.errs) == 0:
		fmt.Fprintln(a.stdout, successMessage(past, r.handled, r.kind))
		return nil
	case r.handled == 0 && r.total == 1:
		return fmt.Errorf("failed to %s %sresource: %v", verb, kindWord(r.kind), r.errs)
	case r.handled == 0:
		return fmt.Errorf("failed to %s any %sresources: %v", verb, kindWord(r.kind), r.errs)
	}
	if r.handled-len(r.errs) > 0 {
		fmt.Fprintf(a.stdout, "Partial success: %s the first %d out of %d %sresources:\n", past, r.handled, r.total, kindWord(r.kind))
	}
	return fmt.Errorf("hit error: %v", r.errs)
}

// singleKind is the one kind of all inputs, or "" when they mix kinds.
func singleKind(ins []inputResource) string {
	kind := ""
	for i, in := range ins {
		k := v3.KindOf(in.r)
		if i > 0 && k != kind {
			return ""
		}
		kind = k
	}
	return kind
}

func kindWord(kind string) string {
	if kind == "" {
		return ""
	}
	return "'" + kind + "' "
}

// successMessage is Calico's: "Successfully applied 2 'IPPool'
// resource(s)", without the kind when several kinds were written.
func successMessage(past string, n int, kind string) string {
	return fmt.Sprintf("Successfully %s %d %sresource(s)", past, n, kindWord(kind))
}

// updateFrom writes r over cur, keeping cur's identity and version unless
// the input pins a version.
func updateFrom(ctx context.Context, c datastore.Client, r, cur v3.Resource) error {
	u := r.DeepCopyObject().(v3.Resource)
	if u.GetResourceVersion() == "" {
		u.SetResourceVersion(cur.GetResourceVersion())
	}
	u.SetUID(cur.GetUID())
	u.SetCreationTimestamp(cur.GetCreationTimestamp())
	_, err := c.Update(ctx, u)
	return err
}

func addFileFlag(cmd *cobra.Command, f *writeFlags) {
	cmd.Flags().StringArrayVarP(&f.files, "filename", "f", nil, "file, directory of *.yaml/*.yml/*.json, or - for stdin (repeatable)")
	cmd.Flags().BoolVarP(&f.recursive, "recursive", "R", false, "Process the filename specified in -f recursively.")
	cmd.Flags().BoolVar(&f.skipEmpty, "skip-empty", false, "Do not error if files contain no data.")
}
