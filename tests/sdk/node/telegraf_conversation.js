// A conversation bot written as telegraf 4.16 bots commonly are: bot.start with its deep-link
// payload, a one-time reply keyboard (Markup.keyboard().oneTime().resize().placeholder()), a
// forceReply question and removeKeyboard at the end, an edited_message handler and a
// my_chat_member handler; polling with every update type, or telegraf's stock webhookCallback
// (it checks x-telegram-bot-api-secret-token, which the gateway sends when its config names it
// in `webhook_secret_token_headers`). No bot.catch: telegraf's default rethrows, so a refused call
// ends the bot, as it does for stock bots.
//
// The dialog is the one of tests/sdk/python/ptb_conversation.py (run_conversation_tests.py).
//
// Environment: BOT_TOKEN, BOT_API_BASE, and for webhook mode WEBHOOK_PORT, WEBHOOK_SECRET.
'use strict'

const http = require('http')
const { Telegraf, Markup } = require('telegraf')

// Every update type of the Bot API, as bots list them when they want everything.
const ALL_TYPES = [
  'message', 'edited_message', 'channel_post', 'edited_channel_post', 'business_connection',
  'business_message', 'edited_business_message', 'deleted_business_messages', 'message_reaction',
  'message_reaction_count', 'inline_query', 'chosen_inline_result', 'callback_query', 'shipping_query',
  'pre_checkout_query', 'purchased_paid_media', 'poll', 'poll_answer', 'my_chat_member', 'chat_member',
  'chat_join_request', 'chat_boost', 'removed_chat_boost'
]

const base = process.env.BOT_API_BASE
const bot = new Telegraf(process.env.BOT_TOKEN, { telegram: { apiRoot: base.endsWith('/') ? base : base + '/' } })
// Where each user is in the dialog.
const step = new Map()

bot.start(async (ctx) => {
  step.set(ctx.from.id, 'pet')
  await ctx.reply(`Hi! You came from ${ctx.payload || 'nowhere'}. Cats or dogs?`,
    Markup.keyboard([['Cats', 'Dogs']]).oneTime().resize().placeholder('Cats or dogs?'))
})

bot.hears(['Cats', 'Dogs'], async (ctx, next) => {
  if (step.get(ctx.from.id) !== 'pet') return next()
  step.set(ctx.from.id, 'name')
  await ctx.reply(`${ctx.message.text} it is. What is your name?`, Markup.forceReply().placeholder('Your name'))
})

bot.on('text', async (ctx, next) => {
  if (step.get(ctx.from.id) !== 'name') return next()
  step.delete(ctx.from.id)
  await ctx.reply(`Nice to meet you, ${ctx.message.text}!`, Markup.removeKeyboard())
})

// The options of each poll this bot sent, by poll id.
const polls = new Map()

bot.command('poll', async (ctx) => {
  const sent = await ctx.replyWithPoll('Best pet?', ['Cats', 'Dogs'], { is_anonymous: false })
  polls.set(sent.poll.id, ['Cats', 'Dogs'])
})

bot.on('poll_answer', async (ctx) => {
  const answer = ctx.pollAnswer
  const options = polls.get(answer.poll_id) || []
  const chosen = answer.option_ids.map((i) => options[i]).join(', ') || 'nothing'
  await ctx.telegram.sendMessage(answer.user.id, `You voted for ${chosen}`)
})

bot.on('edited_message', async (ctx) => {
  await ctx.reply(`You changed your message to ${ctx.editedMessage.text}`,
    { reply_parameters: { message_id: ctx.editedMessage.message_id } })
})

bot.on('my_chat_member', async (ctx) => {
  const change = ctx.myChatMember
  if (['group', 'supergroup'].includes(change.chat.type) && change.new_chat_member.status === 'member') {
    await ctx.telegram.sendMessage(change.chat.id, `Thanks for adding me, @${change.from.username}!`)
  }
})

if (!process.env.WEBHOOK_PORT) {
  bot.launch({ allowedUpdates: ALL_TYPES })
  process.once('SIGINT', () => bot.stop('SIGINT'))
  process.once('SIGTERM', () => bot.stop('SIGTERM'))
} else {
  const port = Number(process.env.WEBHOOK_PORT)
  const path = '/telegraf-conversation'
  const secret = process.env.WEBHOOK_SECRET
  const server = http.createServer(bot.webhookCallback(path, { secretToken: secret }))
  server.listen(port, '127.0.0.1', async () => {
    await bot.telegram.setWebhook(`http://127.0.0.1:${port}${path}`, { secret_token: secret, allowed_updates: ALL_TYPES })
  })
  const stop = () => server.close(() => process.exit(0))
  process.once('SIGINT', stop)
  process.once('SIGTERM', stop)
}
