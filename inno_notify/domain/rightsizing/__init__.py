"""Right-sizing: requested-versus-used advice for a job's next run (issue 5).

Pure rules over a finished job, its measured usage, its pods and its family's earlier runs;
see docs/rightsizing.md for every rule, formula and default.
"""

from inno_notify.domain.rightsizing.engine import recommend
from inno_notify.domain.rightsizing.family import FamilyRun, family_of
from inno_notify.domain.rightsizing.inputs import current_run
from inno_notify.domain.rightsizing.policy import RightsizingPolicy
from inno_notify.domain.rightsizing.rules import RULES

__all__ = ["RULES", "FamilyRun", "RightsizingPolicy", "current_run", "family_of", "recommend"]
