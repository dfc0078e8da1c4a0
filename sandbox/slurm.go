package sandbox

import (
	"context"
	"errors"
	"fmt"
	"strings"
)

// SlurmJob is the Slurm job (and step) a sandbox was created in, as Slurm
// gives them to a job's processes (SLURM_JOB_ID, SLURM_STEP_ID,
// SLURM_ARRAY_JOB_ID, SLURM_ARRAY_TASK_ID).
type SlurmJob struct {
	JobID       string `json:"job_id"`
	StepID      string `json:"step_id,omitempty"`
	ArrayJobID  string `json:"array_job_id,omitempty"`
	ArrayTaskID string `json:"array_task_id,omitempty"`
}

// InJob reports whether sb was created in the Slurm job that id selects:
// JOB is the job whose SLURM_JOB_ID is JOB, exactly (an array task's own
// job ID selects that task only: the array's meta record has the array's
// job ID as its own, and the Epilog= of that one task must not end its
// siblings); ARRAY_TASK is one task of an array (as squeue prints it);
// ARRAY_* is every task of array ARRAY.
func (sb *Sandbox) InJob(id string) bool {
	if sb.Slurm == nil || id == "" {
		return false
	}
	array, task, isTask := strings.Cut(id, "_")
	switch {
	case !isTask:
		return sb.Slurm.JobID == id
	case array == "" || task == "":
		return false
	case task == "*":
		return sb.Slurm.ArrayJobID == array
	default:
		return sb.Slurm.ArrayJobID == array && sb.Slurm.ArrayTaskID == task
	}
}

// PruneSlurmJob stops and removes every sandbox created in the Slurm job
// id selects (see InJob), running or not: what a job left when it ended
// (an Epilog= runs it, see docs/slurm.md). It returns the IDs removed; a
// sandbox it could not remove is in the error, the others are removed all
// the same.
func (m *Manager) PruneSlurmJob(ctx context.Context, id string) ([]string, error) {
	if id == "" {
		return nil, errors.New("prune: empty Slurm job ID")
	}
	list, err := m.List(ctx)
	if err != nil {
		return nil, err
	}
	var removed []string
	var errs []error
	for _, sb := range list {
		if !sb.InJob(id) {
			continue
		}
		if err := m.Remove(ctx, sb.ID, true); err != nil {
			errs = append(errs, fmt.Errorf("sandbox %s: %w", sb.ID[:12], err))
			continue
		}
		removed = append(removed, sb.ID)
	}
	return removed, errors.Join(errs...)
}
