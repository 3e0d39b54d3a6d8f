package config

import (
	"context"
	"errors"
	"fmt"
	"reflect"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore"
)

// Loaded is the stored object and the configuration merged from it.
type Loaded struct {
	Run    RunConfig
	Object *v3.KubeControllersConfiguration
}

// Load reads the KubeControllersConfiguration "default", creating it with
// Calico's defaults when missing, merges the environment over it and
// records the running configuration in its status (only when that
// changed, so watching replicas do not loop).
func Load(ctx context.Context, c datastore.Client, env Env) (Loaded, error) {
	for attempt := 0; ; attempt++ {
		l, err := load(ctx, c, env)
		// Another replica (or a user) wrote the object between our read
		// and our status update: read it again.
		if !errors.Is(err, datastore.ErrConflict) || attempt == 5 {
			return l, err
		}
	}
}

func load(ctx context.Context, c datastore.Client, env Env) (Loaded, error) {
	key := datastore.Key{Kind: v3.KindKubeControllersConfiguration, Name: DefaultName}
	r, err := c.Get(ctx, key)
	if errors.Is(err, datastore.ErrNotFound) {
		def := &v3.KubeControllersConfiguration{
			TypeMeta:   metav1.TypeMeta{Kind: v3.KindKubeControllersConfiguration, APIVersion: v3.GroupVersion},
			ObjectMeta: metav1.ObjectMeta{Name: DefaultName},
			Spec:       v3.KubeControllersDefaults(),
		}
		r, err = c.Create(ctx, def)
		if errors.Is(err, datastore.ErrAlreadyExists) {
			r, err = c.Get(ctx, key)
		}
	}
	if err != nil {
		return Loaded{}, fmt.Errorf("reading KubeControllersConfiguration %s: %w", DefaultName, err)
	}
	kcc := r.(*v3.KubeControllersConfiguration)
	run, st, err := Merge(env, kcc.Spec)
	if err != nil {
		return Loaded{}, fmt.Errorf("KubeControllersConfiguration %s with the environment: %w", DefaultName, err)
	}
	if !reflect.DeepEqual(kcc.Status, st) {
		kcc.Status = st
		out, err := c.Update(ctx, kcc)
		if err != nil {
			return Loaded{}, fmt.Errorf("writing the running configuration to KubeControllersConfiguration %s's status: %w", DefaultName, err)
		}
		kcc = out.(*v3.KubeControllersConfiguration)
	}
	return Loaded{Run: run, Object: kcc}, nil
}

// WaitForChange returns when the stored configuration changes what runs
// (its spec merged with env differs from cur), or when ctx ends, or with
// an error when the watch fails. The caller then reloads.
func WaitForChange(ctx context.Context, c datastore.Client, env Env, cur Loaded) error {
	w, err := c.Watch(ctx, v3.KindKubeControllersConfiguration, datastore.WatchOptions{Revision: cur.Object.ResourceVersion})
	if err != nil {
		return fmt.Errorf("watching KubeControllersConfiguration: %w", err)
	}
	defer w.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case ev, ok := <-w.ResultChan():
			if !ok {
				return errors.New("KubeControllersConfiguration watch ended")
			}
			switch ev.Type {
			case datastore.EventError:
				return fmt.Errorf("watching KubeControllersConfiguration: %w", ev.Err)
			case datastore.EventDeleted:
				if ev.Object != nil && ev.Object.GetName() == DefaultName {
					return nil // recreated with defaults on reload
				}
			case datastore.EventAdded, datastore.EventModified:
				k, ok := ev.Object.(*v3.KubeControllersConfiguration)
				if !ok || k.Name != DefaultName {
					continue
				}
				run, _, err := Merge(env, k.Spec)
				if err != nil || !reflect.DeepEqual(run, cur.Run) {
					return nil
				}
			}
		}
	}
}
