// compose-config reads Compose files with Compose's own loader (compose-go, the library
// Docker Compose is built on, at the version whose schema tests/unit/test_compose.py pins)
// and prints the project as `docker compose config` does:
// schema validation, interpolation, merging and normalisation as Docker will apply them, with
// no Docker engine. Every profile is enabled, so services behind one are read too.
//
//	compose-config -f docker-compose.yml
package main

import (
	"context"
	"flag"
	"fmt"
	"os"

	"github.com/compose-spec/compose-go/v2/cli"
)

func main() {
	var files multiFlag
	flag.Var(&files, "f", "a Compose file (repeatable)")
	flag.Parse()
	options, err := cli.NewProjectOptions(
		files,
		cli.WithOsEnv,
		cli.WithDotEnv,
		cli.WithConfigFileEnv,
		cli.WithDefaultConfigPath,
		cli.WithProfiles([]string{"*"}),
	)
	if err == nil {
		err = run(options)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "compose-config:", err)
		os.Exit(1)
	}
}

func run(options *cli.ProjectOptions) error {
	project, err := options.LoadProject(context.Background())
	if err != nil {
		return err
	}
	out, err := project.MarshalYAML()
	if err != nil {
		return err
	}
	_, err = os.Stdout.Write(out)
	return err
}

type multiFlag []string

func (m *multiFlag) String() string     { return fmt.Sprint(*m) }
func (m *multiFlag) Set(v string) error { *m = append(*m, v); return nil }
