"""Captured `scontrol show ...` output for the parser and doctor tests (real lines where marked)."""

# `scontrol show config` on the test cluster (22.05.8), trimmed: header, some keys, the status line.
CONFIG_22_05 = """Configuration data as of 2026-11-23T16:12:17
AccountingStorageBackupHost = (null)
JobRequeue              = 1
PowerPlugin             = 
PreemptMode             = REQUEUE
PreemptType             = preempt/partition_prio
ProctrackType           = proctrack/linuxproc
SelectType              = select/linear
SlurmctldParameters     = preempt_send_user_signal
SLURM_VERSION           = 22.05.8
TaskPlugin              = task/none
TaskPluginParam         = (null type)

Slurmctld(primary) at ddpctl-ctl is UP
"""  # noqa: W291

# The shape 23.x/24.11 print: sections after the main block repeat `Key = value` lines (a key seen again in a
# section must not replace the main block's value), and plugin lists.
CONFIG_SECTIONED = """Configuration data as of 2026-11-23T16:30:00
JobRequeue              = 0
ProctrackType           = proctrack/cgroup
SLURM_VERSION           = 24.11.5
TaskPlugin              = task/cgroup,task/affinity

Cgroup Support Configuration:
CgroupPlugin            = cgroup/v1
ConstrainCores          = yes
JobRequeue              = 1

MPI Plugins Configuration:
PMIxCliTmpDirBase       = (null)

Slurmctld(primary) at ddpctl-ctl is UP
"""

PARTITION_22_05 = (
    "PartitionName=debug AllowGroups=ALL AllowAccounts=ALL AllowQos=ALL AllocNodes=ALL Default=YES QoS=N/A "
    "DefaultTime=NONE DisableRootJobs=NO ExclusiveUser=NO GraceTime=10 Hidden=NO MaxNodes=UNLIMITED "
    "MaxTime=UNLIMITED MinNodes=0 LLN=NO MaxCPUsPerNode=UNLIMITED Nodes=node[1-2] PriorityJobFactor=1 "
    "PriorityTier=1 RootOnly=NO ReqResv=NO OverSubscribe=NO OverTimeLimit=NONE PreemptMode=REQUEUE State=UP "
    "TotalCPUs=4 TotalNodes=2 SelectTypeParameters=NONE JobDefaults=(null) DefMemPerNode=UNLIMITED "
    "MaxMemPerNode=UNLIMITED TRES=cpu=4,mem=8G,node=2,billing=4\n"
    "PartitionName=lowprio AllowGroups=ALL Default=NO GraceTime=10 Nodes=node[1-2] PreemptMode=CANCEL State=UP\n"
    "PartitionName=urgent AllowGroups=ALL Default=NO GraceTime=0 Nodes=node[1-2] PreemptMode=OFF State=UP\n"
)

NODE_22_05 = (
    "NodeName=node1 Arch=x86_64 CoresPerSocket=2  CPUAlloc=0 CPUEfctv=2 CPUTot=2 CPULoad=0.87 "
    "AvailableFeatures=(null) ActiveFeatures=(null) Gres=(null) NodeAddr=10.99.0.11 NodeHostName=node1 "
    "Version=22.05.8 OS=Linux 6.18.44-fc-v669 #1 SMP PREEMPT_DYNAMIC @0  RealMemory=4096 AllocMem=0 "
    "FreeMem=21920 Sockets=1 Boards=1 State=IDLE ThreadsPerCore=1 TmpDisk=0 Weight=1 Owner=N/A MCS_label=N/A "
    "Partitions=debug,lowprio,urgent,scale  BootTime=2026-11-23T13:00:33 SlurmdStartTime=2026-11-23T16:12:17 "
    "LastBusyTime=2026-11-23T16:12:17 CfgTRES=cpu=2,mem=4G,billing=2 AllocTRES= CapWatts=n/a CurrentWatts=0 "
    "AveWatts=0 ExtSensorsJoules=n/s ExtSensorsWatts=0 ExtSensorsTemp=n/s\n"
)

# `scontrol show part -o` as scontrol(1) of Slurm 24.11.5 shows it (its EXAMPLES, on one line): new keys
# (ExclusiveTopo, MaxCPUsPerSocket, NodeSets) among the old ones.
PARTITION_24_11 = (
    "PartitionName=debug AllowGroups=ALL AllowAccounts=ALL AllowQos=ALL AllocNodes=ALL Default=YES QoS=N/A "
    "DefaultTime=NONE DisableRootJobs=NO ExclusiveUser=NO ExclusiveTopo=NO GraceTime=0 Hidden=NO MaxNodes=UNLIMITED "
    "MaxTime=UNLIMITED MinNodes=0 LLN=NO MaxCPUsPerNode=UNLIMITED MaxCPUsPerSocket=UNLIMITED NodeSets=ALL "
    "Nodes=snowflake[0-48] PriorityJobFactor=100 PriorityTier=100 RootOnly=NO ReqResv=NO OverSubscribe=NO "
    "OverTimeLimit=NONE PreemptMode=REQUEUE State=UP TotalCPUs=588 TotalNodes=49 SelectTypeParameters=NONE "
    "JobDefaults=(null) DefMemPerNode=UNLIMITED MaxMemPerNode=UNLIMITED TRES=cpu=588,mem=1204224M,node=49,billing=49\n"
)

# `scontrol show job -o` on the test cluster (22.05.8), a held job: keys with `/` and `:` (CPUs/Task,
# ReqB:S:C:T, AllocNode:Sid), an empty value (NodeList=), values after `=` holding `=` (TRES).
JOB_22_05 = (
    "JobId=1 JobName=j.sh UserId=root(0) GroupId=root(0) MCS_label=N/A Priority=0 Nice=0 Account=(null) QOS=(null) "
    "JobState=PENDING Reason=JobHeldUser Dependency=(null) Requeue=1 Restarts=0 BatchFlag=1 Reboot=0 ExitCode=0:0 "
    "RunTime=00:00:00 TimeLimit=00:01:00 TimeMin=N/A SubmitTime=2026-11-25T10:50:33 EligibleTime=Unknown "
    "AccrueTime=Unknown StartTime=Unknown EndTime=Unknown Deadline=N/A SuspendTime=None SecsPreSuspend=0 "
    "LastSchedEval=2026-11-25T10:50:33 Scheduler=Main Partition=debug AllocNode:Sid=localhost:5396 "
    "ReqNodeList=(null) ExcNodeList=(null) NodeList= NumNodes=1-1 NumCPUs=1 NumTasks=1 CPUs/Task=1 "
    "ReqB:S:C:T=0:0:*:* TRES=cpu=1,mem=2G,node=1,billing=1 Socks/Node=* NtasksPerN:B:S:C=0:0:*:* CoreSpec=* "
    "MinCPUsNode=1 MinMemoryCPU=2G MinTmpDiskNode=0 Features=(null) DelayBoot=00:00:00 OverSubscribe=OK "
    "Contiguous=0 Licenses=(null) Network=(null) Command=/tmp/x/j.sh WorkDir=/home/u StdErr=/dev/null "
    "StdIn=/dev/null StdOut=/dev/null Power= \n"
)

# The live test cluster's config keys ddpctl reads that CONFIG_22_05 leaves out (22.05.8, real lines).
CONFIG_22_05_MORE = "AuthInfo                = cred_expire=5\nMaxArraySize            = 1001\n"
