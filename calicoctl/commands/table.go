package commands

import (
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/spf13/cobra"
)

// boxTable renders the bordered tables Calico's calicoctl prints for ipam
// show and node status: headers centred, numbers right-aligned, other cells
// left-aligned.
func boxTable(w io.Writer, header []string, rows [][]string) {
	width := make([]int, len(header))
	for i, h := range header {
		width[i] = utf8.RuneCountInString(h)
	}
	for _, r := range rows {
		for i, c := range r {
			width[i] = max(width[i], utf8.RuneCountInString(c))
		}
	}
	sep := "+"
	for _, n := range width {
		sep += strings.Repeat("-", n+2) + "+"
	}
	line := func(cells []string, align func(i int, c string) string) {
		var b strings.Builder
		b.WriteString("|")
		for i, c := range cells {
			b.WriteString(" " + align(i, c) + " |")
		}
		fmt.Fprintln(w, b.String())
	}
	fmt.Fprintln(w, sep)
	line(header, func(i int, c string) string {
		pad := width[i] - utf8.RuneCountInString(c)
		return strings.Repeat(" ", pad/2) + c + strings.Repeat(" ", pad-pad/2)
	})
	fmt.Fprintln(w, sep)
	for _, r := range rows {
		line(r, func(i int, c string) string {
			pad := strings.Repeat(" ", width[i]-utf8.RuneCountInString(c))
			if isNumber(c) {
				return pad + c
			}
			return c + pad
		})
	}
	fmt.Fprintln(w, sep)
}

func isNumber(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}

// requireSubcommand makes a group command (ipam, node, completion) fail
// on an unknown subcommand instead of printing help and succeeding.
func requireSubcommand(c *cobra.Command) {
	c.Args = cobra.ArbitraryArgs
	c.RunE = func(cmd *cobra.Command, args []string) error {
		if len(args) == 0 {
			return cmd.Help()
		}
		var names []string
		for _, s := range cmd.Commands() {
			if s.IsAvailableCommand() {
				names = append(names, s.Name())
			}
		}
		return fmt.Errorf("unknown command %q for %q: use one of %s", args[0], cmd.CommandPath(), strings.Join(names, ", "))
	}
}
